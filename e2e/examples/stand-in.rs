//! Runs the API stand-in as a process and writes a kubeconfig for it, so the suite's real-cluster
//! mode (`CALDERA_E2E_KUBECONFIG`) can be tried without a cluster:
//!
//! ```text
//! cargo run -p caldera-e2e --example stand-in -- /tmp/stand-in.kubeconfig &
//! CALDERA_E2E_KUBECONFIG=/tmp/stand-in.kubeconfig cargo test -p caldera-e2e
//! ```
//!
//! The stand-in runs as a bare control plane (no node lifecycle controller, no namespaces made
//! on first write) with its model of kube-scheduler beside it (for the gate-mode scenarios,
//! as a real cluster would run kube-scheduler), until interrupted.

use caldera_e2e::cluster::stand_in_options;
use caldera_testkit::apiserver::ApiServer;
use std::process::ExitCode;

fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    server: {url}\ncontexts:\n- name: stand-in\n  context:\n    cluster: stand-in\n    user: stand-in\ncurrent-context: stand-in\nusers:\n- name: stand-in\n  user: {{}}\n"
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: stand-in KUBECONFIG-PATH");
        return ExitCode::from(2);
    };
    let server = match ApiServer::start_with(stand_in_options()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(&path, kubeconfig(&server.url())) {
        eprintln!("writing {path}: {e}");
        return ExitCode::FAILURE;
    }
    let _kube_scheduler = server.start_kube_scheduler(std::time::Duration::from_millis(100));
    eprintln!(
        "API stand-in at {} with kube-scheduler; kubeconfig in {path}; Ctrl-C stops it",
        server.url()
    );
    let _ = tokio::signal::ctrl_c().await;
    server.shutdown().await;
    ExitCode::SUCCESS
}
