"""Asks Sluice's HTTP API from Python with `requests`: a check, a batch, a lease, and an error
code to branch on. Runs against `sluice serve --config examples/clients/sluice.yaml`.

    python http_client.py http://127.0.0.1:8080

Exits non-zero if an answer is not the one the rules give (CI runs it so).
"""

import sys
import uuid

import requests


class RateLimited(Exception):
    """A denial: the request must wait `retry_after_ms`."""

    def __init__(self, decision):
        super().__init__(decision.get("message") or "rate limited")
        self.decision = decision


class SluiceError(Exception):
    """An error answer, with the stable `code` (`unknown_rule`, `missing_attribute`, ...)."""

    def __init__(self, status, error):
        super().__init__(f"{status} {error['code']}: {error['message']}")
        self.code = error["code"]


class Sluice:
    def __init__(self, base_url, timeout=0.5):
        self.base = base_url.rstrip("/")
        self.http = requests.Session()
        self.timeout = timeout

    def _post(self, path, body):
        response = self.http.post(self.base + path, json=body, timeout=self.timeout)
        if response.status_code in (200, 429):
            return response.status_code, response.json()
        raise SluiceError(response.status_code, response.json()["error"])

    def check(self, rule, cost=1, **attributes):
        status, decision = self._post(
            "/v1/check", {"rule": rule, "attributes": attributes, "cost": cost}
        )
        if status == 429:
            raise RateLimited(decision)
        return decision

    def check_all(self, checks):
        """Several rules (or identities) at once: all pass, or none consumes anything."""
        status, answer = self._post("/v1/check-all", {"checks": checks})
        if status == 429:
            raise RateLimited(next(d for d in answer["decisions"] if not d["allowed"]))
        return answer["decisions"]

    def release(self, lease):
        return self._post("/v1/release", {"lease": lease})[1]["released"]


def main(base_url):
    sluice = Sluice(base_url)
    ip = f"198.51.100.{uuid.uuid4().int % 250}"
    # Five attempts pass, the sixth is denied with the rule's message.
    for attempt in range(5):
        decision = sluice.check("login", ip=ip)
        assert decision["remaining"] == 4 - attempt, decision
    try:
        sluice.check("login", ip=ip)
        raise AssertionError("the sixth attempt should be denied")
    except RateLimited as denied:
        assert denied.decision["retry_after_ms"] > 0
        print("denied:", denied, "retry after", denied.decision["retry_after_ms"], "ms")

    # A batch: the API call and a job slot together.
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    decisions = sluice.check_all(
        [
            {"rule": "api", "attributes": {"user": "u1"}, "cost": 2},
            {"rule": "jobs", "attributes": {"tenant": tenant}},
        ]
    )
    lease = decisions[1]["lease"]
    assert sluice.release(lease) is True
    assert sluice.release(lease) is False

    # Errors carry a code to branch on.
    try:
        sluice.check("no_such_rule", user="u1")
        raise AssertionError("an unknown rule is an error")
    except SluiceError as error:
        assert error.code == "unknown_rule", error
    try:
        sluice.check("api")
        raise AssertionError("a missing attribute is an error")
    except SluiceError as error:
        assert error.code == "missing_attribute", error
    print("http client: ok")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080")
