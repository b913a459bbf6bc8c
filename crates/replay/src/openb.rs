//! Alibaba's `cluster-trace-gpu-v2023` ("openb"), read as published: node lists
//! (`sn,cpu_milli,memory_mib,gpu,model`) and pod lists (`name,cpu_milli,memory_mib,num_gpu,
//! gpu_milli[,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time]`).
//!
//! Each pod is a job of one member. `num_gpu` GPUs of `gpu_milli` thousandths each: a pod
//! with `gpu_milli < 1000` asks for a share of one GPU ([`crate::trace::Gpu::is_fraction`]).
//! `gpu_spec` lists the GPU models it accepts. In timeline mode a pod arrives at
//! `creation_time` and runs `deletion_time − scheduled_time` (or `− creation_time` when it
//! was never scheduled); the inflation mode uses neither.

use crate::cluster::NodeSpec;
use crate::csv::Table;
use crate::error::Result;
use crate::trace::{field, models, parse_int, Gpu, JobSpec};
use std::collections::BTreeMap;

/// Reads an `openb_node_list_*.csv`.
pub fn read_nodes(text: &str, file: &str) -> Result<Vec<NodeSpec>> {
    let table = Table::read(
        text,
        file,
        &["sn", "cpu_milli", "memory_mib", "gpu"],
        Some(&["sn", "cpu_milli", "memory_mib", "gpu", "model"]),
    )?;
    let mut out = Vec::new();
    for row in table.iter() {
        let gpus: u32 = field(&row, "gpu", 0, parse_int)?;
        let mib: i64 = field(&row, "memory_mib", 0, parse_int)?;
        out.push(NodeSpec {
            name: row.required("sn")?.to_string(),
            cpu_milli: field(&row, "cpu_milli", 0, parse_int)?,
            memory: mib.saturating_mul(1 << 20),
            gpus,
            gpu_model: row.get("model").filter(|_| gpus > 0).map(str::to_string),
            // As the published node YAML (data/node_yaml) declares.
            pods: 1001,
            labels: BTreeMap::new(),
        });
    }
    Ok(out)
}

/// Reads an `openb_pod_list_*.csv`.
pub fn read_pods(text: &str, file: &str) -> Result<Vec<JobSpec>> {
    let table = Table::read(
        text,
        file,
        &["name", "cpu_milli", "memory_mib", "num_gpu"],
        Some(&[
            "name",
            "cpu_milli",
            "memory_mib",
            "num_gpu",
            "gpu_milli",
            "gpu_spec",
            "qos",
            "pod_phase",
            "creation_time",
            "deletion_time",
            "scheduled_time",
        ]),
    )?;
    let mut out = Vec::new();
    for row in table.iter() {
        let num_gpu: u32 = field(&row, "num_gpu", 0, parse_int)?;
        let gpu_milli: u32 = field(&row, "gpu_milli", 1000, parse_int)?;
        let gpu = match (num_gpu, gpu_milli) {
            (0, _) => Gpu::default(),
            (n, m) if m >= 1000 => Gpu::whole(n),
            (1, 0) => Gpu::whole(1),
            (1, m) => Gpu::from_milli(m).unwrap_or_default(),
            (n, m) => {
                return Err(row.error(
                    "gpu_milli",
                    format!("{m} thousandths of each of {n} GPUs: only one GPU can be shared"),
                ))
            }
        };
        let secs = |c: &str| field(&row, c, None, |t| parse_int::<i64>(t).map(Some));
        let created = secs("creation_time")?.unwrap_or(0);
        let scheduled = secs("scheduled_time")?;
        let deleted = secs("deletion_time")?;
        let duration = match deleted {
            Some(d) => (d - scheduled.unwrap_or(created)).max(0),
            None => 0,
        };
        let mib: i64 = field(&row, "memory_mib", 0, parse_int)?;
        let mut job = JobSpec::new(
            row.required("name")?,
            created.saturating_mul(1000),
            duration.saturating_mul(1000),
            1,
            gpu,
        );
        job.cpu_milli = field(&row, "cpu_milli", 0, parse_int)?;
        job.memory = mib.saturating_mul(1 << 20);
        job.gpu_models = row.get("gpu_spec").map(models).unwrap_or_default();
        out.push(job);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_as_published_become_one_member_jobs() {
        let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                    p0,12000,16384,1,1000,,LS,Running,0,100,10\n\
                    p1,6000,12288,1,460,V100M16|V100M32,BE,Running,5,50,5\n\
                    p2,88000,327680,8,1000,,LS,Succeeded,7,,\n";
        let jobs = read_pods(text, "p.csv").unwrap();
        assert_eq!(jobs[0].gpu, Gpu::whole(1));
        assert_eq!(jobs[0].duration_ms, 90_000);
        assert!(jobs[1].gpu.is_fraction());
        assert_eq!(jobs[1].gpu_models, vec!["V100M16", "V100M32"]);
        assert_eq!(jobs[2].gpu, Gpu::whole(8));
        assert_eq!(jobs[2].memory, 327680 << 20);
    }

    #[test]
    fn the_short_multigpu_header_reads_too() {
        let jobs = read_pods(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,10,2,1000\n",
            "m.csv",
        )
        .unwrap();
        assert_eq!(jobs[0].gpu, Gpu::whole(2));
        let err = read_pods(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,10,2,500\n",
            "m.csv",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("m.csv:2:13: column \"gpu_milli\""),
            "{err}"
        );
    }

    #[test]
    fn node_list_reads() {
        let nodes = read_nodes(
            "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nc0,32000,131072,0,\n",
            "n.csv",
        )
        .unwrap();
        assert_eq!(nodes[0].gpus, 2);
        assert_eq!(nodes[0].gpu_model.as_deref(), Some("P100"));
        assert_eq!(nodes[1].gpu_model, None);
    }
}
