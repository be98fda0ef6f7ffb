//! The reproduction with the real binary: `kubectl meta dev -f examples/hello-world`
//! converged and running, the API server stopped for 20 s (longer than the 15 s controller
//! Lease) and started again on the same port and state. `dev` keeps running, says once that the
//! server is unreachable and once that it is back, and converges on a change made afterwards.

use std::time::Duration;

use crate::common::cli::*;
use crate::common::faults::{Restartable, dev_cmd, set_who};
use crate::common::{TIMEOUT, wait_for};
use kube::api::{Api, DynamicObject};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_binary_survives_a_20s_api_server_outage() {
    let mut rs = Restartable::start().await;
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = rs.kubeconfig().display().to_string();
    let dev = Background::start(dev_cmd(
        home.path(),
        &kubeconfig,
        &[example("hello-world")],
        &["--apply", "--no-tui"],
    ));
    dev.wait_output("create    Pod.v1 default/hello").await;

    rs.stop().await;
    dev.wait_output("API server unreachable since").await;
    // The outage outlasts the Lease (15 s): a plain wait, it is the scenario.
    tokio::time::sleep(Duration::from_secs(20)).await;
    rs.start_again().await;
    dev.wait_output("API server reachable again").await;

    set_who(&rs.client, "hello", "Again").await;
    let pods: Api<DynamicObject> = Api::namespaced_with(rs.client.clone(), "default", &pods());
    wait_for("the pod to greet Again", TIMEOUT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get_opt("hello").await.ok()??;
            serde_json::to_string(&p)
                .ok()?
                .contains("Hello, Again!")
                .then_some(())
        }
    })
    .await;
    let out = dev.output();
    assert_eq!(
        out.matches("API server unreachable since").count(),
        1,
        "{out}"
    );
    assert_eq!(
        out.matches("API server reachable again").count(),
        1,
        "{out}"
    );
    assert!(!out.contains("lost the controller lease"), "{out}");
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "dev ran until interrupted: {stderr}");
    assert!(!stderr.contains("lost the controller lease"), "{stderr}");
    rs.stop().await;
}
