//! Caldera's job trace (CSV, one job a line, header required) and the job model every reader
//! produces (`openb` pod lists and `caldera record` too).
//!
//! | column | meaning | default |
//! |---|---|---|
//! | `job` | name, unique in the file | required |
//! | `submit` | seconds from the start (decimals allowed, to the millisecond) | required |
//! | `duration` | seconds a member runs once bound | required |
//! | `members` | pods in the job | 1 |
//! | `min_members` | gang minimum | `members` |
//! | `cpu`, `memory` | per member, Kubernetes quantities (`500m`, `4`, `16Gi`) | 0 |
//! | `gpu` | per member: whole GPUs (`2`) or a fraction of one (`0.25`) | 0 |
//! | `gpu_model` | allowed GPU models, `|`-separated (node label `nvidia.com/gpu.product`) | any |
//! | `queue` | Volcano queue | `default` |
//! | `priority` | integer priority | 0 |
//! | `preemptible` | `true`/`false` | `true` |

use crate::csv::{quote, Row, Table};
use crate::error::Result;
use caldera_model::quantity::{format_bytes, format_milli, parse_quantity, Scale};
use std::collections::BTreeSet;

/// The columns of a job trace, in the order [`write_jobs`] writes them.
pub const JOB_COLUMNS: [&str; 12] = [
    "job",
    "submit",
    "duration",
    "members",
    "min_members",
    "cpu",
    "memory",
    "gpu",
    "gpu_model",
    "queue",
    "priority",
    "preemptible",
];

/// GPUs one member asks for, in thousandths of a GPU: a whole number of GPUs (a multiple of
/// 1000), or a fraction of one GPU (1–999), which only GPU sharing can serve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gpu {
    milli: u32,
}

impl Gpu {
    /// `n` whole GPUs.
    pub fn whole(n: u32) -> Gpu {
        Gpu {
            milli: n.saturating_mul(1000),
        }
    }

    /// A fraction of one GPU (`milli` in 1..=999), or whole GPUs for multiples of 1000.
    /// `None` for amounts above one GPU that are not whole.
    pub fn from_milli(milli: u32) -> Option<Gpu> {
        (milli < 1000 || milli.is_multiple_of(1000)).then_some(Gpu { milli })
    }

    /// Thousandths of a GPU.
    pub fn milli(self) -> u32 {
        self.milli
    }

    /// Whole GPUs, when the request is whole (0 included).
    pub fn whole_gpus(self) -> Option<u32> {
        self.milli.is_multiple_of(1000).then_some(self.milli / 1000)
    }

    /// A share of one GPU (`0 < milli < 1000`).
    pub fn is_fraction(self) -> bool {
        !self.milli.is_multiple_of(1000)
    }
}

impl std::fmt::Display for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.whole_gpus() {
            Some(n) => write!(f, "{n}"),
            None => f.write_str(&decimal(i64::from(self.milli))),
        }
    }
}

/// One job of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// Name as in the trace.
    pub name: String,
    /// Arrival, in milliseconds from the start.
    pub submit_ms: i64,
    /// How long each member runs once bound, in milliseconds.
    pub duration_ms: i64,
    /// Members (pods).
    pub members: u32,
    /// The gang minimum.
    pub min_members: u32,
    /// CPU per member, millicores.
    pub cpu_milli: i64,
    /// Memory per member, bytes.
    pub memory: i64,
    /// GPUs per member.
    pub gpu: Gpu,
    /// Allowed GPU models (empty: any).
    pub gpu_models: Vec<String>,
    /// Queue.
    pub queue: String,
    /// Priority.
    pub priority: i32,
    /// Whether other jobs may preempt it.
    pub preemptible: bool,
}

impl JobSpec {
    /// A job of `members` members of `gpu` GPUs each, submitted at `submit_ms`, running
    /// `duration_ms`, in queue `default`, with no CPU or memory request.
    pub fn new(name: &str, submit_ms: i64, duration_ms: i64, members: u32, gpu: Gpu) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            submit_ms,
            duration_ms,
            members,
            min_members: members,
            cpu_milli: 0,
            memory: 0,
            gpu,
            gpu_models: Vec::new(),
            queue: caldera_api::DEFAULT_QUEUE.to_string(),
            priority: 0,
            preemptible: true,
        }
    }

    /// GPUs (thousandths) the whole job asks for: members × per-member GPUs.
    pub fn gpu_milli_total(&self) -> u64 {
        u64::from(self.members) * u64::from(self.gpu.milli())
    }
}

/// Seconds (`12`, `0.5`, up to three decimals) as milliseconds.
pub fn parse_seconds(text: &str) -> std::result::Result<i64, String> {
    parse_thousandths(text).map_err(|e| format!("{e} (seconds, e.g. 30 or 1.5)"))
}

/// A non-negative decimal with at most three decimals, in thousandths.
fn parse_thousandths(text: &str) -> std::result::Result<i64, String> {
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, f),
        None => (text, ""),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(int) || (int.is_empty() && digits(frac))) || !(frac.is_empty() || digits(frac)) {
        return Err(format!("{text:?} is not a non-negative number"));
    }
    if frac.len() > 3 {
        return Err(format!("{text:?} has more than three decimals"));
    }
    let whole: i64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| format!("{text:?} is too large"))?
    };
    let mut milli = whole
        .checked_mul(1000)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    let padded = format!("{frac:0<3}");
    milli += padded.parse::<i64>().unwrap_or(0);
    Ok(milli)
}

/// Thousandths printed as a decimal with as few digits as needed (`1500` → `1.5`).
pub fn decimal(milli: i64) -> String {
    let (sign, m) = if milli < 0 {
        ("-", -milli)
    } else {
        ("", milli)
    };
    let (int, frac) = (m / 1000, m % 1000);
    if frac == 0 {
        return format!("{sign}{int}");
    }
    let f = format!("{frac:03}");
    format!("{sign}{int}.{}", f.trim_end_matches('0'))
}

/// A GPU amount: whole GPUs, or a fraction of one GPU.
pub fn parse_gpu(text: &str) -> std::result::Result<Gpu, String> {
    let milli = parse_thousandths(text)?;
    let milli = u32::try_from(milli).map_err(|_| format!("{text:?} is too large"))?;
    Gpu::from_milli(milli).ok_or_else(|| {
        format!("{text:?} is neither whole GPUs nor a fraction of one GPU (e.g. 2 or 0.25)")
    })
}

pub(crate) fn parse_bool(text: &str) -> std::result::Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        _ => Err(format!("{text:?} is not true or false")),
    }
}

pub(crate) fn parse_int<T: std::str::FromStr>(text: &str) -> std::result::Result<T, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not an integer in range"))
}

/// A field of `row` parsed by `parse`, or `default` when empty.
pub(crate) fn field<T>(
    row: &Row<'_>,
    column: &str,
    default: T,
    parse: impl Fn(&str) -> std::result::Result<T, String>,
) -> Result<T> {
    match row.get(column) {
        None => Ok(default),
        Some(text) => parse(text).map_err(|e| row.error(column, e)),
    }
}

pub(crate) fn quantity(scale: Scale) -> impl Fn(&str) -> std::result::Result<i64, String> {
    move |text| {
        let v = parse_quantity(text, scale).map_err(|e| e.to_string())?;
        if v < 0 {
            return Err(format!("{text:?} is negative"));
        }
        Ok(v)
    }
}

/// Reads a Caldera job trace. Every line is checked before anything is returned: a malformed
/// one is an error naming file, line and column, and no job is returned.
pub fn read_jobs(text: &str, file: &str) -> Result<Vec<JobSpec>> {
    let table = Table::read(
        text,
        file,
        &["job", "submit", "duration"],
        Some(&JOB_COLUMNS),
    )?;
    let mut names = BTreeSet::new();
    let mut jobs = Vec::with_capacity(table.rows.len());
    for row in table.iter() {
        let name = row.required("job")?.to_string();
        if !names.insert(name.clone()) {
            return Err(row.error("job", format!("job {name:?} appears twice")));
        }
        let submit_ms =
            parse_seconds(row.required("submit")?).map_err(|e| row.error("submit", e))?;
        let duration_ms =
            parse_seconds(row.required("duration")?).map_err(|e| row.error("duration", e))?;
        let members: u32 = field(&row, "members", 1, parse_int)?;
        if members == 0 {
            return Err(row.error("members", "a job has at least one member"));
        }
        let min_members: u32 = field(&row, "min_members", members, parse_int)?;
        if min_members == 0 || min_members > members {
            return Err(row.error(
                "min_members",
                format!("{min_members} is not between 1 and members ({members})"),
            ));
        }
        let job = JobSpec {
            name,
            submit_ms,
            duration_ms,
            members,
            min_members,
            cpu_milli: field(&row, "cpu", 0, quantity(Scale::Milli))?,
            memory: field(&row, "memory", 0, quantity(Scale::Units))?,
            gpu: field(&row, "gpu", Gpu::default(), parse_gpu)?,
            gpu_models: row.get("gpu_model").map(models).unwrap_or_default(),
            queue: row
                .get("queue")
                .unwrap_or(caldera_api::DEFAULT_QUEUE)
                .to_string(),
            priority: field(&row, "priority", 0, parse_int)?,
            preemptible: field(&row, "preemptible", true, parse_bool)?,
        };
        jobs.push(job);
    }
    Ok(jobs)
}

/// `A|B|` as the list `[A, B]`.
pub fn models(text: &str) -> Vec<String> {
    text.split('|')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .collect()
}

/// Writes jobs in the trace format (header first), in the order given.
pub fn write_jobs(jobs: &[JobSpec]) -> String {
    let mut out = JOB_COLUMNS.join(",");
    out.push('\n');
    for j in jobs {
        out.push_str(&job_line(j));
        out.push('\n');
    }
    out
}

/// One job as a trace line (no line break).
pub fn job_line(j: &JobSpec) -> String {
    let fields = [
        quote(&j.name),
        decimal(j.submit_ms),
        decimal(j.duration_ms),
        j.members.to_string(),
        j.min_members.to_string(),
        format_milli(j.cpu_milli),
        format_bytes(j.memory),
        j.gpu.to_string(),
        quote(&j.gpu_models.join("|")),
        quote(&j.queue),
        j.priority.to_string(),
        j.preemptible.to_string(),
    ];
    fields.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "job,submit,duration,members,min_members,cpu,memory,gpu,gpu_model,queue,priority,preemptible\n";

    #[test]
    fn reads_every_column_and_defaults() {
        let text = format!(
            "{HEADER}train,0,30,8,,500m,16Gi,1,A100|H100,ml,10,false\nsmall,1.5,60,,,,,0.25,,,,\n"
        );
        let jobs = read_jobs(&text, "t.csv").unwrap();
        assert_eq!(jobs[0].min_members, 8);
        assert_eq!(jobs[0].cpu_milli, 500);
        assert_eq!(jobs[0].memory, 16 << 30);
        assert_eq!(jobs[0].gpu_models, vec!["A100", "H100"]);
        assert!(!jobs[0].preemptible);
        assert_eq!(jobs[1].submit_ms, 1500);
        assert_eq!(jobs[1].members, 1);
        assert_eq!(jobs[1].queue, "default");
        assert!(jobs[1].gpu.is_fraction());
        assert_eq!(read_jobs(&write_jobs(&jobs), "again").unwrap(), jobs);
    }

    #[test]
    fn malformed_values_name_file_line_and_column() {
        let cases = [
            ("a,0,30,2,3,,,,,,,\n", "t.csv:2:10: column \"min_members\": 3 is not between 1 and members (2)"),
            ("a,0,30,1,1,2x,,,,,,\n", "t.csv:2:12: column \"cpu\": invalid quantity \"2x\": unknown suffix"),
            ("a,-1,30,,,,,,,,,\n", "t.csv:2:3: column \"submit\": \"-1\" is not a non-negative number (seconds, e.g. 30 or 1.5)"),
            ("a,0,30,,,,,1.5,,,,\n", "t.csv:2:12: column \"gpu\": \"1.5\" is neither whole GPUs nor a fraction of one GPU (e.g. 2 or 0.25)"),
            ("a,0,,,,,,,,,,\n", "t.csv:2:5: column \"duration\": a value is required"),
            ("a,0,1,,,,,,,,,maybe\n", "t.csv:2:15: column \"preemptible\": \"maybe\" is not true or false"),
        ];
        for (line, want) in cases {
            let err = read_jobs(&format!("{HEADER}{line}"), "t.csv").unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn a_bad_line_returns_no_job_at_all() {
        let text = format!("{HEADER}ok,0,1,,,,,,,,,\nbad,x,1,,,,,,,,,\n");
        assert!(read_jobs(&text, "t.csv").is_err());
    }

    #[test]
    fn duplicate_names_and_unknown_columns_are_refused() {
        let err = read_jobs("job,submit,duration\na,0,1\na,1,1\n", "t.csv").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.csv:3:1: column \"job\": job \"a\" appears twice"
        );
        let err = read_jobs("job,submit,duration,gpus\n", "t.csv").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("t.csv:1:21: unknown column \"gpus\""),
            "{err}"
        );
        let err = read_jobs("job,duration\n", "t.csv").unwrap_err();
        assert!(
            err.to_string()
                .contains("lacks the required column \"submit\""),
            "{err}"
        );
    }
}
