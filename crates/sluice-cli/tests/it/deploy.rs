//! The deployment files agree with the binary: the Kubernetes manifests (`deploy/kubernetes`)
//! and the `Dockerfile` name only environment variables `sluice serve --help` lists, listen
//! where the container port and the Service point, probe paths the service answers 200 on, and
//! mount the rules where `SLUICE_CONFIG` reads them; the ConfigMap's rules validate and, updated
//! the way the kubelet updates a mounted ConfigMap (a new timestamped directory swapped in under
//! `..data`), are reloaded. The schemas themselves are `kubernetes-validate`'s job
//! (`scripts/test`).

use crate::common;

use std::path::{Path, PathBuf};

use common::{Options, Server, TempDir, WITHIN, eventually, sluice, version_of, wait_for_version};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manifest(name: &str) -> Value {
    let path = repo().join("deploy/kubernetes").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The variables `sluice serve --help` lists.
fn variables_in_help() -> Vec<String> {
    let out = sluice().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    help.split("[env: ")
        .skip(1)
        .map(|rest| {
            rest.split(['=', ']'])
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The one container of the Deployment.
fn container() -> Value {
    let deployment = manifest("deployment.yaml");
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .clone();
    assert_eq!(containers.len(), 1);
    containers[0].clone()
}

fn env_value(container: &Value, name: &str) -> Option<String> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_string))
}

fn rules_text() -> String {
    manifest("configmap.yaml")["data"]["sluice.yaml"]
        .as_str()
        .expect("the ConfigMap holds sluice.yaml")
        .to_string()
}

/// `admin_token_env` of the rules: the one variable the file, not `--help`, names.
fn admin_variable(rules: &str) -> String {
    let rules: Value = serde_saphyr::from_str(rules).unwrap();
    rules["admin_token_env"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Envoy reaches the pods without edits: SLUICE_GRPC_LISTEN binds the container port named grpc,
/// and the Service forwards to it.
#[test]
fn the_manifests_open_the_grpc_port() {
    let container = container();
    let listen = env_value(&container, "SLUICE_GRPC_LISTEN").expect("SLUICE_GRPC_LISTEN is set");
    let (host, port) = listen.rsplit_once(':').unwrap();
    assert_eq!(host, "0.0.0.0", "reachable from outside the pod");
    let port: u64 = port.parse().unwrap();
    let grpc = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "grpc")
        .expect("a container port named grpc");
    assert_eq!(grpc["containerPort"].as_u64(), Some(port));
    let service = manifest("service.yaml");
    let forwarded = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["targetPort"] == "grpc" || p["targetPort"].as_u64() == Some(port));
    assert!(forwarded, "the Service forwards no port to gRPC: {service}");
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let exposed = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .expect("EXPOSE");
    assert!(
        exposed.split_whitespace().any(|p| p == port.to_string()),
        "Dockerfile: EXPOSE {exposed}"
    );
}

/// Several replicas on the memory store would each count alone (N× every limit), and the service
/// cannot see its siblings: with more than one replica the manifest makes the Redis URL required,
/// so a pod without it does not start.
#[test]
fn several_replicas_never_run_on_the_memory_store() {
    let deployment = manifest("deployment.yaml");
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap_or(1);
    if replicas <= 1 {
        return;
    }
    let container = container();
    let store = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "SLUICE_STORE")
        .unwrap_or_else(|| panic!("{replicas} replicas and no SLUICE_STORE"));
    match store["value"].as_str() {
        Some(url) => assert!(url.starts_with("redis"), "{replicas} replicas on {url}"),
        None => {
            let secret = &store["valueFrom"]["secretKeyRef"];
            assert!(secret.is_object(), "SLUICE_STORE from a Secret: {store}");
            assert_ne!(
                secret["optional"], true,
                "{replicas} replicas with an optional store: without the Secret each counts alone"
            );
        }
    }
}

/// The build commit has one variable: the one the Dockerfile passes is the one the build script
/// reads (and writes for `sluice_build_info` and `--version`), and no other is read.
#[test]
fn the_build_commit_comes_from_one_variable() {
    let script = std::fs::read_to_string(repo().join("crates/sluice-server/build.rs")).unwrap();
    assert!(
        script.contains(r#"const COMMIT: &str = "SLUICE_BUILD_COMMIT";"#),
        "the build script reads SLUICE_BUILD_COMMIT"
    );
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("ARG SLUICE_BUILD_COMMIT="),
        "Dockerfile ARG"
    );
    assert!(
        dockerfile.contains("ENV SLUICE_BUILD_COMMIT=${SLUICE_BUILD_COMMIT}"),
        "the build argument reaches cargo"
    );
    for crate_dir in std::fs::read_dir(repo().join("crates")).unwrap() {
        let build = crate_dir.unwrap().path().join("build.rs");
        let Ok(text) = std::fs::read_to_string(&build) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.contains("COMMIT") && line.contains("SLUICE_") {
                assert!(
                    line.contains("SLUICE_BUILD_COMMIT"),
                    "{}:{}: {line}",
                    build.display(),
                    n + 1
                );
            }
        }
    }
}

#[test]
fn the_manifests_name_what_the_binary_uses() {
    let known = variables_in_help();
    assert!(known.iter().any(|v| v == "SLUICE_LISTEN"), "{known:?}");
    let rules = rules_text();
    let admin = admin_variable(&rules);
    let container = container();
    for var in container["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap();
        assert!(
            known.iter().any(|k| k == name) || name == admin,
            "{name} is read by nothing (known: {known:?}, admin: {admin})"
        );
    }
    // The port: where SLUICE_LISTEN binds = the container port named http = the Service's target.
    let listen = env_value(&container, "SLUICE_LISTEN").expect("SLUICE_LISTEN is set");
    let (host, port) = listen.rsplit_once(':').unwrap();
    assert_eq!(host, "0.0.0.0", "reachable from outside the pod");
    let port: u64 = port.parse().unwrap();
    let ports = container["ports"].as_array().unwrap();
    let http = ports
        .iter()
        .find(|p| p["name"] == "http")
        .expect("a port named http");
    assert_eq!(http["containerPort"].as_u64(), Some(port));
    let service = manifest("service.yaml");
    let target = &service["spec"]["ports"][0]["targetPort"];
    assert!(
        target == "http" || target.as_u64() == Some(port),
        "{target}"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        let probe_port = &container[probe]["httpGet"]["port"];
        assert!(
            probe_port == "http" || probe_port.as_u64() == Some(port),
            "{probe}"
        );
    }
    // The rules: SLUICE_CONFIG reads the ConfigMap's key in the directory the volume is mounted.
    let config = env_value(&container, "SLUICE_CONFIG").expect("SLUICE_CONFIG is set");
    let config = Path::new(&config);
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| Path::new(m["mountPath"].as_str().unwrap()) == config.parent().unwrap())
        .expect("a volume mounted at the rule file's directory");
    assert!(
        mount.get("subPath").is_none(),
        "a subPath mount never sees ConfigMap updates"
    );
    let deployment = manifest("deployment.yaml");
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume")
        .clone();
    let configmap = manifest("configmap.yaml");
    assert_eq!(volume["configMap"]["name"], configmap["metadata"]["name"]);
    assert!(configmap["data"][config.file_name().unwrap().to_str().unwrap()].is_string());
    // The Dockerfile: the same variables, port and a non-root user.
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(&format!("SLUICE_LISTEN={listen}")),
        "Dockerfile listen"
    );
    assert!(
        dockerfile.contains(&format!("EXPOSE {port}")),
        "Dockerfile port"
    );
    assert!(
        dockerfile.contains(&format!("SLUICE_CONFIG={}", config.display())),
        "Dockerfile config"
    );
    for line in dockerfile
        .lines()
        .filter(|l| l.starts_with("ENV") || l.starts_with("    SLUICE"))
    {
        for word in line.split_whitespace().filter(|w| w.starts_with("SLUICE_")) {
            let name = word.split('=').next().unwrap();
            if name != "SLUICE_BUILD_COMMIT" {
                assert!(known.iter().any(|k| k == name), "Dockerfile: {name}");
            }
        }
    }
    let user = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    assert!(
        !user.starts_with("0") && !user.starts_with("root"),
        "{user}"
    );
    let pod = &deployment["spec"]["template"]["spec"]["securityContext"];
    assert_eq!(
        pod["runAsUser"].as_u64(),
        user.split(':').next().unwrap().parse().ok()
    );
}

/// The rules as mounted: `sluice.yaml` → `..data/sluice.yaml`, `..data` → a timestamped
/// directory; an update writes a new directory and renames a new `..data` link over the old.
struct ConfigMapVolume {
    dir: TempDir,
    generation: u32,
}

impl ConfigMapVolume {
    fn new(rules: &str) -> ConfigMapVolume {
        let volume = ConfigMapVolume {
            dir: TempDir::new(),
            generation: 0,
        };
        std::os::unix::fs::symlink("..data/sluice.yaml", volume.dir.path().join("sluice.yaml"))
            .unwrap();
        let mut volume = volume;
        volume.update(rules);
        volume
    }

    fn update(&mut self, rules: &str) {
        self.generation += 1;
        let name = format!(
            "..2026_11_28_00_00_0{}.{}",
            self.generation,
            1000 + self.generation
        );
        std::fs::create_dir(self.dir.path().join(&name)).unwrap();
        std::fs::write(self.dir.path().join(&name).join("sluice.yaml"), rules).unwrap();
        let tmp = self.dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&name, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("..data")).unwrap();
    }
}

#[tokio::test]
async fn the_configmap_rules_serve_the_probes_and_reload_when_the_kubelet_swaps_them() {
    let rules = rules_text();
    let mut volume = ConfigMapVolume::new(&rules);
    let path = volume.dir.path().join("sluice.yaml");
    let out = sluice().arg("validate").arg(&path).output().unwrap();
    assert!(out.status.success(), "{out:?}");

    // Started with the Deployment's settings (its address made a free loopback port).
    let container = container();
    let mut env: Vec<(String, String)> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_string(),
                e["value"].as_str()?.to_string(),
            ))
        })
        .filter(|(name, _)| name != "SLUICE_CONFIG" && name != "SLUICE_LISTEN")
        .collect();
    env.push(("SLUICE_LISTEN".into(), "127.0.0.1:0".into()));
    env.push(("SLUICE_CONFIG".into(), path.display().to_string()));
    let env: Vec<(&str, String)> = env.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    // No flag: the rule file comes from SLUICE_CONFIG, as in the pod.
    let server = Server::start_with(
        "rules: {}\n",
        "unused.yaml",
        Options {
            listen: None,
            config_flag: false,
            env,
            ..Options::default()
        },
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        let path = container[probe]["httpGet"]["path"].as_str().unwrap();
        let answer = server.get(path).await;
        assert_eq!(answer.status, 200, "{probe} {path}: {answer:?}");
    }
    wait_for_version(&server, &version_of(&rules)).await;
    let changed = rules.replace("burst: 20", "burst: 30");
    assert_ne!(changed, rules);
    volume.update(&changed);
    wait_for_version(&server, &version_of(&changed)).await;
    let answer = server
        .check("api", serde_json::json!({ "client": "c1" }))
        .await;
    assert_eq!(answer.json["limit"].as_u64(), Some(30), "{answer:?}");
    eventually(WITHIN, "the reload counted", || async {
        (server
            .metric("sluice_config_reloads_total{result=\"ok\"}")
            .await
            >= 1.0)
            .then_some(())
    })
    .await;
}
