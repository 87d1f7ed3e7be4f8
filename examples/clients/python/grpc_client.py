"""Asks Sluice's own gRPC API (`sluice.v1`) from Python, with stubs generated from
`crates/sluice-server/proto/sluice/v1/sluice.proto` by grpcio-tools at start.

    python grpc_client.py 127.0.0.1:8081

(`grpc_listen` in the config.) Exits non-zero if an answer is not the one the rules give.
"""

import importlib
import os
import sys
import tempfile
import uuid

import grpc
from grpc_status import rpc_status
from google.rpc import error_details_pb2
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "..", "crates", "sluice-server", "proto")


def generated():
    """Compiles the .proto into a temporary package and imports it."""
    out = tempfile.mkdtemp(prefix="sluice-v1-")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            os.path.join(PROTO_ROOT, "sluice", "v1", "sluice.proto"),
        ]
    )
    if code != 0:
        raise SystemExit(f"protoc failed ({code})")
    sys.path.insert(0, out)
    return (
        importlib.import_module("sluice.v1.sluice_pb2"),
        importlib.import_module("sluice.v1.sluice_pb2_grpc"),
    )


def error_code(error):
    """The stable code of a failed call: the `reason` of its google.rpc.ErrorInfo."""
    status = rpc_status.from_call(error)
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return None


def main(address):
    pb, pb_grpc = generated()
    channel = grpc.insecure_channel(address)
    sluice = pb_grpc.SluiceStub(channel)
    ip = f"192.0.2.{uuid.uuid4().int % 250}"
    for attempt in range(5):
        decision = sluice.Check(pb.CheckRequest(rule="login", attributes={"ip": ip}), timeout=2)
        assert decision.allowed and decision.remaining == 4 - attempt, decision
    denied = sluice.Check(pb.CheckRequest(rule="login", attributes={"ip": ip}), timeout=2)
    assert not denied.allowed and denied.HasField("retry_after_ms"), denied
    print("denied:", denied.message, "retry after", denied.retry_after_ms, "ms")
    peek = sluice.Peek(pb.CheckRequest(rule="login", attributes={"ip": ip}), timeout=2)
    assert not peek.allowed

    tenant = f"t-{uuid.uuid4().hex[:8]}"
    answer = sluice.CheckAll(
        pb.CheckAllRequest(
            checks=[
                pb.CheckRequest(rule="api", attributes={"user": "u1"}, cost=2),
                pb.CheckRequest(rule="jobs", attributes={"tenant": tenant}),
            ]
        ),
        timeout=2,
    )
    assert answer.allowed and len(answer.decisions) == 2, answer
    lease = answer.decisions[1].lease
    renewed = sluice.Renew(pb.LeaseRequest(lease=lease), timeout=2)
    assert renewed.renewed and renewed.lease_until_ms > 0
    assert sluice.Release(pb.LeaseRequest(lease=lease), timeout=2).released
    assert not sluice.Release(pb.LeaseRequest(lease=lease), timeout=2).released

    try:
        sluice.Check(pb.CheckRequest(rule="no_such_rule"), timeout=2)
        raise AssertionError("an unknown rule is an error")
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.NOT_FOUND, error
        assert error_code(error) == "unknown_rule", error
        metadata = dict(error.trailing_metadata() or ())
        assert metadata.get("sluice-error-code") == "unknown_rule", metadata
    try:
        sluice.Check(pb.CheckRequest(rule="api"), timeout=2)
        raise AssertionError("a missing attribute is an error")
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
        assert error_code(error) == "missing_attribute", error
    print("grpc client: ok")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8081")
