//! What `caldera replay` reads, told apart by its header: Caldera's CSVs ([`crate::trace`],
//! [`crate::cluster`]) or Alibaba's `cluster-trace-gpu-v2023` lists ([`crate::openb`]).

use crate::cluster::NodeSpec;
use crate::error::{Error, Result};
use crate::trace::{read_jobs, JobSpec};

/// Reads whichever trace format `text` is, by its header: Caldera's job trace (`job,submit,…`)
/// or an Alibaba `openb_pod_list_*.csv` (`name,cpu_milli,…`).
pub fn read_trace(text: &str, file: &str) -> Result<Vec<JobSpec>> {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    let header: Vec<&str> = first.split(',').map(str::trim).collect();
    if header.contains(&"cpu_milli") && header.contains(&"num_gpu") {
        return crate::openb::read_pods(text, file);
    }
    if header.contains(&"job") || first.is_empty() {
        return read_jobs(text, file);
    }
    Err(Error::Input {
        file: file.into(),
        line: 1,
        column: 1,
        message: format!(
            "neither a Caldera job trace (header job,submit,duration,...) nor an openb pod list (header name,cpu_milli,memory_mib,num_gpu,...): {first:?}"
        ),
    })
}

/// Reads whichever nodes format `text` is, by its header: Caldera's nodes CSV
/// (`node,cpu,memory,gpu[,gpu_model][,pods][,label…]`) or an openb node list
/// (`sn,cpu_milli,memory_mib,gpu,model`).
pub fn read_nodes(text: &str, file: &str) -> Result<Vec<NodeSpec>> {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    if first.split(',').any(|c| c.trim() == "sn") {
        return crate::openb::read_nodes(text, file);
    }
    crate::cluster::read_nodes_csv(text, file)
}
