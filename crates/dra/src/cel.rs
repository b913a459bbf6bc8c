//! CEL device selectors, evaluated with the `cel` crate in the environment Kubernetes gives
//! them (`k8s.io/dynamic-resource-allocation/cel`): one variable `device` with `driver`,
//! `attributes` (domain → name → value; `version` attributes as semantic versions) and
//! `capacity` (domain → name → quantity), plus Kubernetes' `quantity` and `semver` libraries.
//!
//! Programs are compiled once per expression and results kept per (expression, device) for the
//! life of the [`Selectors`] (a session): a selector's answer for a device never changes while
//! the snapshot does not.

mod lazy;
use caldera_model::dra::{AttributeValue, Device};
use caldera_model::{parse_quantity, Scale};
use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, ExecutionError, Program, Value};
use lazy::Lazy;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// A Kubernetes quantity in CEL (`quantity("40Gi")`, `device.capacity[...]`): thousandths.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Quantity(pub(crate) i64);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version (`semver("1.2.3")`, `version` attributes).
#[derive(Debug, PartialEq, Eq)]
struct Semver {
    core: [u64; 3],
    pre: Vec<String>,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    /// Semantic Versioning 2.0.0 text; build metadata is ignored for precedence.
    fn parse(text: &str) -> Option<Semver> {
        let text = text.split_once('+').map_or(text, |(v, _)| v);
        let (core, pre) = match text.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (text, None),
        };
        let mut parts = core.split('.');
        let mut out = [0u64; 3];
        for slot in &mut out {
            let p = parts.next()?;
            if p.is_empty() || (p.len() > 1 && p.starts_with('0')) {
                return None;
            }
            *slot = p.parse().ok()?;
        }
        if parts.next().is_some() {
            return None;
        }
        let pre = match pre {
            Some(p) if p.is_empty() || p.split('.').any(str::is_empty) => return None,
            Some(p) => p.split('.').map(str::to_string).collect(),
            None => Vec::new(),
        };
        Some(Semver { core: out, pre })
    }

    fn precedence(&self, other: &Semver) -> Ordering {
        self.core
            .cmp(&other.core)
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let ord = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(x), Ok(y)) => x.cmp(&y),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            (Err(_), Err(_)) => a.cmp(b),
                        };
                        if ord != Ordering::Equal {
                            return ord;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

fn fail(function: &str, why: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, why)
}

fn quantity(s: Arc<String>) -> Result<Value, ExecutionError> {
    let milli = parse_quantity(&s, Scale::Milli).map_err(|e| fail("quantity", e))?;
    Ok(Value::Opaque(Arc::new(Quantity(milli))))
}

fn is_quantity(s: Arc<String>) -> bool {
    parse_quantity(&s, Scale::Milli).is_ok()
}

fn semver(s: Arc<String>) -> Result<Value, ExecutionError> {
    let v = Semver::parse(&s).ok_or_else(|| fail("semver", format!("invalid semver {s:?}")))?;
    Ok(Value::Opaque(Arc::new(v)))
}

fn is_semver(s: Arc<String>) -> bool {
    Semver::parse(&s).is_some()
}

/// Orders two quantities or two versions.
fn order(
    function: &str,
    a: &Arc<dyn Opaque>,
    b: &Arc<dyn Opaque>,
) -> Result<Ordering, ExecutionError> {
    if let (Some(x), Some(y)) = (a.downcast_ref::<Quantity>(), b.downcast_ref::<Quantity>()) {
        return Ok(x.0.cmp(&y.0));
    }
    if let (Some(x), Some(y)) = (a.downcast_ref::<Semver>(), b.downcast_ref::<Semver>()) {
        return Ok(x.precedence(y));
    }
    Err(fail(
        function,
        format!(
            "no such overload: {}.{function}({})",
            a.runtime_type_name(),
            b.runtime_type_name()
        ),
    ))
}

fn compare_to(
    This(this): This<Arc<dyn Opaque>>,
    other: Arc<dyn Opaque>,
) -> Result<i64, ExecutionError> {
    Ok(order("compareTo", &this, &other)? as i64)
}

fn is_greater_than(
    This(this): This<Arc<dyn Opaque>>,
    other: Arc<dyn Opaque>,
) -> Result<bool, ExecutionError> {
    Ok(order("isGreaterThan", &this, &other)? == Ordering::Greater)
}

fn is_less_than(
    This(this): This<Arc<dyn Opaque>>,
    other: Arc<dyn Opaque>,
) -> Result<bool, ExecutionError> {
    Ok(order("isLessThan", &this, &other)? == Ordering::Less)
}

fn the_quantity(function: &str, v: &Arc<dyn Opaque>) -> Result<i64, ExecutionError> {
    v.downcast_ref::<Quantity>().map(|q| q.0).ok_or_else(|| {
        fail(
            function,
            format!("{} is not a quantity", v.runtime_type_name()),
        )
    })
}

fn the_version<'a>(function: &str, v: &'a Arc<dyn Opaque>) -> Result<&'a Semver, ExecutionError> {
    v.downcast_ref::<Semver>().ok_or_else(|| {
        fail(
            function,
            format!("{} is not a semver", v.runtime_type_name()),
        )
    })
}

fn as_integer(This(this): This<Arc<dyn Opaque>>) -> Result<i64, ExecutionError> {
    let q = the_quantity("asInteger", &this)?;
    if q % 1000 != 0 {
        return Err(fail("asInteger", "cannot convert value to integer"));
    }
    Ok(q / 1000)
}

fn is_integer(This(this): This<Arc<dyn Opaque>>) -> Result<bool, ExecutionError> {
    Ok(the_quantity("isInteger", &this)? % 1000 == 0)
}

fn as_approximate_float(This(this): This<Arc<dyn Opaque>>) -> Result<f64, ExecutionError> {
    Ok(the_quantity("asApproximateFloat", &this)? as f64 / 1000.0)
}

fn sign(This(this): This<Arc<dyn Opaque>>) -> Result<i64, ExecutionError> {
    Ok(the_quantity("sign", &this)?.signum())
}

/// `q.add(x)` / `q.sub(x)`: `x` a quantity or an int.
fn arith(
    function: &str,
    this: &Arc<dyn Opaque>,
    other: &Value,
    negate: bool,
) -> Result<Value, ExecutionError> {
    let a = the_quantity(function, this)?;
    let b = match other {
        Value::Int(i) => i
            .checked_mul(1000)
            .ok_or_else(|| fail(function, "overflow"))?,
        Value::Opaque(o) => the_quantity(function, o)?,
        v => return Err(fail(function, format!("cannot {function} {v:?}"))),
    };
    let b = if negate { -b } else { b };
    let sum = a.checked_add(b).ok_or_else(|| fail(function, "overflow"))?;
    Ok(Value::Opaque(Arc::new(Quantity(sum))))
}

fn add(This(this): This<Arc<dyn Opaque>>, other: Value) -> Result<Value, ExecutionError> {
    arith("add", &this, &other, false)
}

fn sub(This(this): This<Arc<dyn Opaque>>, other: Value) -> Result<Value, ExecutionError> {
    arith("sub", &this, &other, true)
}

fn major(This(this): This<Arc<dyn Opaque>>) -> Result<i64, ExecutionError> {
    Ok(the_version("major", &this)?.core[0] as i64)
}

fn minor(This(this): This<Arc<dyn Opaque>>) -> Result<i64, ExecutionError> {
    Ok(the_version("minor", &this)?.core[1] as i64)
}

fn patch(This(this): This<Arc<dyn Opaque>>) -> Result<i64, ExecutionError> {
    Ok(the_version("patch", &this)?.core[2] as i64)
}

/// The root context: CEL's standard library plus Kubernetes' quantity and semver functions.
fn root() -> Context<'static, 'static> {
    let mut ctx = Context::default();
    // The names are not in the standard library, so declaring them cannot conflict; a conflict
    // would only make that one function unavailable (its selectors then fail with an error).
    let _ = ctx.add_function("quantity", quantity);
    let _ = ctx.add_function("isQuantity", is_quantity);
    let _ = ctx.add_function("semver", semver);
    let _ = ctx.add_function("isSemver", is_semver);
    let _ = ctx.add_function("compareTo", compare_to);
    let _ = ctx.add_function("isGreaterThan", is_greater_than);
    let _ = ctx.add_function("isLessThan", is_less_than);
    let _ = ctx.add_function("asInteger", as_integer);
    let _ = ctx.add_function("isInteger", is_integer);
    let _ = ctx.add_function("asApproximateFloat", as_approximate_float);
    let _ = ctx.add_function("sign", sign);
    let _ = ctx.add_function("add", add);
    let _ = ctx.add_function("sub", sub);
    let _ = ctx.add_function("major", major);
    let _ = ctx.add_function("minor", minor);
    let _ = ctx.add_function("patch", patch);
    ctx
}

/// A `version` attribute's CEL value: a semantic version, or its text when it is not one.
pub(crate) fn semver_or_string(s: &str) -> Value {
    match Semver::parse(s) {
        Some(v) => Value::Opaque(Arc::new(v)),
        None => Value::String(Arc::new(s.to_string())),
    }
}

/// What a selector can see of a device: driver, attributes, capacity, whether it is shared.
type Content<'a> = (
    &'a Arc<str>,
    &'a std::collections::BTreeMap<Arc<str>, AttributeValue>,
    &'a std::collections::BTreeMap<Arc<str>, caldera_model::dra::Capacity>,
    bool,
);

/// The longest expression kube-apiserver accepts in a selector (10 KiB).
pub const MAX_LENGTH: usize = 10 * 1024;
/// The deepest bracket nesting parsed: the parser recurses per level, and a selector is a user's
/// input, so depth is bounded before it is parsed.
pub const MAX_NESTING: usize = 64;
/// The deepest syntax tree evaluated: evaluation recurses per level on the session's thread.
pub const MAX_DEPTH: usize = 32;
/// The parser's stack: it runs on a thread of its own with this much (reserved, committed only
/// as used), since its recursion would overflow a worker thread's on inputs well within
/// [`MAX_NESTING`].
const PARSER_STACK: usize = 256 << 20;

/// Compiles `expressions` (each as [`Program::compile`] would), refusing inputs that could
/// exhaust a stack (too long, nested too deeply) with a compile error instead of crashing the
/// scheduler. The parser runs on one thread of its own for the whole batch.
fn compile_all(expressions: Vec<Arc<str>>) -> Vec<Result<Program, Arc<str>>> {
    let refuse = |why: String| Err(Arc::from(format!("CEL compile error: {why}")));
    let mut out: Vec<Option<Result<Program, Arc<str>>>> = Vec::with_capacity(expressions.len());
    let mut to_parse = Vec::new();
    for (i, e) in expressions.iter().enumerate() {
        if e.len() > MAX_LENGTH {
            out.push(Some(refuse(format!(
                "expression longer than {MAX_LENGTH} bytes"
            ))));
        } else if nesting(e) > MAX_NESTING {
            out.push(Some(refuse(format!(
                "expression nested more than {MAX_NESTING} levels deep"
            ))));
        } else {
            out.push(None);
            to_parse.push((i, e.to_string()));
        }
    }
    if !to_parse.is_empty() {
        let count = to_parse.len();
        let parsed = std::thread::Builder::new()
            .name("cel-parser".into())
            .stack_size(PARSER_STACK)
            .spawn(move || {
                to_parse
                    .into_iter()
                    .map(|(i, text)| (i, Program::compile(&text).map_err(|e| e.to_string())))
                    .collect::<Vec<_>>()
            })
            .map_err(|e| format!("could not start the parser: {e}"))
            .and_then(|h| h.join().map_err(|_| "the parser failed".to_string()));
        match parsed {
            Ok(results) => {
                for (i, r) in results {
                    out[i] = Some(match r {
                        Err(e) => refuse(e),
                        Ok(p) if depth(p.expression()) > MAX_DEPTH => {
                            refuse(format!("expression more than {MAX_DEPTH} levels deep"))
                        }
                        Ok(p) => Ok(p),
                    });
                }
            }
            Err(why) => {
                for slot in out.iter_mut().filter(|s| s.is_none()).take(count) {
                    *slot = Some(refuse(why.clone()));
                }
            }
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| refuse("not parsed".into())))
        .collect()
}

/// The deepest bracket nesting (`(`, `[`, `{`) outside string literals.
fn nesting(expression: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expression.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '(' | '[' | '{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    max
}

/// The depth of a syntax tree, walked without recursion.
fn depth(root: &cel::IdedExpr) -> usize {
    use cel::common::ast::{EntryExpr, Expr};
    let mut deepest = 0;
    let mut stack: Vec<(&cel::IdedExpr, usize)> = vec![(root, 1)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        let d = d + 1;
        match &e.expr {
            Expr::Call(c) => {
                stack.extend(c.target.iter().map(|t| (&**t, d)));
                stack.extend(c.args.iter().map(|a| (a, d)));
            }
            Expr::Comprehension(c) => {
                for part in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    stack.push((part, d));
                }
            }
            Expr::List(l) => stack.extend(l.elements.iter().map(|x| (x, d))),
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        stack.push((&me.key, d));
                        stack.push((&me.value, d));
                    }
                }
            }
            Expr::Struct(st) => {
                for entry in &st.entries {
                    match &entry.expr {
                        EntryExpr::StructField(f) => stack.push((&f.value, d)),
                        EntryExpr::MapEntry(me) => {
                            stack.push((&me.key, d));
                            stack.push((&me.value, d));
                        }
                    }
                }
            }
            Expr::Select(sel) => stack.push((&sel.operand, d)),
            Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
        }
    }
    deepest
}

/// A selector's answer for one device content, as kept: not asked yet, no, yes, or an error
/// (its text in [`Selectors::errors`]).
const UNKNOWN: u8 = 0;
const NO: u8 = 1;
const YES: u8 = 2;
const ERROR: u8 = 3;

/// Compiled selectors and their answers per device, kept for a session.
pub struct Selectors {
    /// Built on the first evaluation: a session without selectors pays nothing for CEL's
    /// standard library.
    root: Option<Context<'static, 'static>>,
    ids: HashMap<Arc<str>, u32>,
    programs: Vec<Result<Program, Arc<str>>>,
    /// Per inventory device index: the id of its content (driver, attributes, capacity), under
    /// which values and answers are kept, since devices alike answer every selector alike.
    /// Empty: the index is the key.
    shapes: Vec<u32>,
    /// How many contents there are (answers rows grow past it when asked about more).
    contents: usize,
    /// Per selector id, per content id: the answer ([`UNKNOWN`], [`NO`], [`YES`], [`ERROR`]),
    /// so a lookup is two indexings, no hashing and no allocation.
    answers: Vec<Vec<u8>>,
    /// The text of every [`ERROR`] answer, by (selector id, content id).
    errors: HashMap<(u32, u32), Arc<str>>,
    /// The last expressions [`Selectors::id`] was asked about, by address (held, so no other
    /// text can have it): every search asks its class's and requests' selectors again, and
    /// claims alike share the same text.
    recent: Vec<(Arc<str>, u32)>,
}

/// How many expressions [`Selectors::recent`] keeps.
const RECENT: usize = 8;

impl Default for Selectors {
    fn default() -> Self {
        Self::new(0)
    }
}

impl Selectors {
    /// Keyed by the index given to [`Selectors::matches`]; `devices` is a capacity hint.
    pub fn new(devices: usize) -> Self {
        Selectors {
            root: None,
            ids: HashMap::new(),
            programs: Vec::new(),
            shapes: Vec::new(),
            contents: devices,
            answers: Vec::new(),
            errors: HashMap::new(),
            recent: Vec::new(),
        }
    }

    /// For an inventory's `devices`: [`Selectors::matches`] takes an index into them, and
    /// devices with equal driver, attributes, capacity and sharing share their answers (one evaluation
    /// per content and expression for the session).
    pub fn for_devices(devices: &[Device]) -> Self {
        // Sized for every device distinct: growing it would hash every content again.
        let mut ids: HashMap<Content, u32> = HashMap::with_capacity(devices.len());
        let shapes: Vec<u32> = devices
            .iter()
            .map(|d| {
                let next = ids.len() as u32;
                *ids.entry((&d.driver, &d.attributes, &d.capacity, d.shared))
                    .or_insert(next)
            })
            .collect();
        let mut out = Self::new(ids.len());
        out.shapes = shapes;
        out
    }

    /// The id of `expression`, compiled on first sight.
    pub fn id(&mut self, expression: &Arc<str>) -> u32 {
        if let Some((_, id)) = self.recent.iter().find(|(e, _)| Arc::ptr_eq(e, expression)) {
            return *id;
        }
        let id = match self.ids.get(expression) {
            Some(&id) => id,
            None => {
                self.compile(std::iter::once(expression));
                self.ids.get(expression).copied().unwrap_or(0)
            }
        };
        if self.recent.len() == RECENT {
            self.recent.remove(0);
        }
        self.recent.push((expression.clone(), id));
        id
    }

    /// Compiles every expression not seen yet in one go (one parser thread for the batch):
    /// the allocator passes all of a session's selectors at once.
    pub fn compile<'e>(&mut self, expressions: impl IntoIterator<Item = &'e Arc<str>>) {
        let mut fresh: Vec<Arc<str>> = Vec::new();
        let mut seen: std::collections::HashSet<&Arc<str>> = std::collections::HashSet::new();
        for e in expressions {
            if !self.ids.contains_key(e) && seen.insert(e) {
                fresh.push(e.clone());
            }
        }
        if fresh.is_empty() {
            return;
        }
        for (e, program) in fresh.iter().zip(compile_all(fresh.clone())) {
            let id = self.programs.len() as u32;
            self.programs.push(program);
            self.answers.push(vec![UNKNOWN; self.contents]);
            self.ids.insert(e.clone(), id);
        }
    }

    /// The compile error of `expression`, if any.
    pub fn compile_error(&mut self, expression: &Arc<str>) -> Option<Arc<str>> {
        let id = self.id(expression);
        self.programs[id as usize].as_ref().err().cloned()
    }

    /// Whether `device` (index `index` in the inventory, or in the caller's numbering with
    /// [`Selectors::new`]) satisfies `expression`: an error is a compile error, a runtime
    /// error, or a result that is not a bool. The answer is kept for the session.
    pub fn matches(
        &mut self,
        expression: &Arc<str>,
        index: u32,
        device: &Device,
    ) -> Result<bool, Arc<str>> {
        let id = self.id(expression);
        self.matches_id(id, index, device)
    }

    /// [`Selectors::matches`] for the expression of id `id` (from [`Selectors::id`]): callers
    /// asking about many devices resolve the id once.
    pub fn matches_id(&mut self, id: u32, index: u32, device: &Device) -> Result<bool, Arc<str>> {
        let content = self.shapes.get(index as usize).copied().unwrap_or(index);
        let (i, c) = (id as usize, content as usize);
        match self.answers[i].get(c).copied().unwrap_or(UNKNOWN) {
            YES => return Ok(true),
            NO => return Ok(false),
            ERROR => {
                if let Some(e) = self.errors.get(&(id, content)) {
                    return Err(e.clone());
                }
            }
            _ => {}
        }
        let answer = self.evaluate(id, device);
        let row = &mut self.answers[i];
        if row.len() <= c {
            row.resize(c + 1, UNKNOWN);
        }
        row[c] = match &answer {
            Ok(true) => YES,
            Ok(false) => NO,
            Err(e) => {
                self.errors.insert((id, content), e.clone());
                ERROR
            }
        };
        answer
    }

    /// How many (selector, device content) answers are kept.
    #[cfg(test)]
    fn answered(&self) -> usize {
        self.answers
            .iter()
            .flatten()
            .filter(|&&a| a != UNKNOWN)
            .count()
    }

    fn evaluate(&mut self, id: u32, device: &Device) -> Result<bool, Arc<str>> {
        let program = match &self.programs[id as usize] {
            Ok(p) => p,
            Err(e) => return Err(e.clone()),
        };
        let mut ctx = self.root.get_or_insert_with(root).new_inner_scope();
        ctx.add_variable_as_val("device", Box::new(Lazy::device(device)));
        match program.execute(&ctx) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(Arc::from(format!(
                "CEL runtime error: expression must return a bool, got {other:?}"
            ))),
            Err(e) => Err(Arc::from(format!("CEL runtime error: {e}"))),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use caldera_model::dra::{Capacity, DeviceNodes};
    use std::collections::BTreeMap;

    /// An H100 with a product name, a driver version, an index, a PCIe root and 80Gi.
    pub(crate) fn gpu() -> Device {
        let mut attributes = BTreeMap::new();
        attributes.insert(
            Arc::from("gpu.nvidia.com/productName"),
            AttributeValue::String("NVIDIA H100 80GB HBM3".into()),
        );
        attributes.insert(
            Arc::from("gpu.nvidia.com/driverVersion"),
            AttributeValue::Version("550.54.15".into()),
        );
        attributes.insert(Arc::from("gpu.nvidia.com/index"), AttributeValue::Int(3));
        attributes.insert(
            Arc::from("resource.kubernetes.io/pcieRoot"),
            AttributeValue::String("pci0000:00".into()),
        );
        let mut capacity = BTreeMap::new();
        capacity.insert(
            Arc::from("gpu.nvidia.com/memory"),
            Capacity::new("memory", 80 * (1 << 30) * 1000, "80Gi"),
        );
        Device {
            driver: "gpu.nvidia.com".into(),
            pool: "node-a".into(),
            name: "gpu-3".into(),
            attributes,
            capacity,
            nodes: DeviceNodes::Node("node-a".into()),
            shared: false,
            consumes: Vec::new(),
            unsupported: None,
        }
    }

    fn check(expression: &str) -> Result<bool, String> {
        let mut s = Selectors::new(1);
        s.matches(&Arc::from(expression), 0, &gpu())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn selectors_see_driver_attributes_and_capacity_as_kubernetes_does() {
        for yes in [
            r#"device.driver == "gpu.nvidia.com""#,
            r#"device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")"#,
            r#"device.attributes["gpu.nvidia.com"].index == 3"#,
            r#"device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00""#,
            r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
            r#"device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("79Gi"))"#,
            r#"device.capacity["gpu.nvidia.com"].memory == quantity("80Gi")"#,
            r#"device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))"#,
            r#"device.attributes["gpu.nvidia.com"].driverVersion.major() == 550"#,
            r#"has(device.attributes["gpu.nvidia.com"].productName)"#,
            r#""productName" in device.attributes["gpu.nvidia.com"]"#,
            r#"!has(device.attributes["gpu.nvidia.com"].brand)"#,
            r#"quantity("1.5").add(1).compareTo(quantity("2500m")) == 0"#,
            r#"semver("1.2.3-alpha").isLessThan(semver("1.2.3"))"#,
        ] {
            assert_eq!(check(yes), Ok(true), "{yes}");
        }
        for no in [
            r#"device.driver == "dra.example.com""#,
            r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("96Gi")) >= 0"#,
            r#"device.attributes["gpu.nvidia.com"].productName == "A100""#,
        ] {
            assert_eq!(check(no), Ok(false), "{no}");
        }
    }

    #[test]
    fn compile_and_runtime_errors_are_errors_with_their_text() {
        let compile = check("device.driver ==").unwrap_err();
        assert!(compile.starts_with("CEL compile error"), "{compile}");
        let missing = check(r#"device.attributes["gpu.nvidia.com"].brand == "x""#).unwrap_err();
        assert!(
            missing.starts_with("CEL runtime error") && missing.contains("brand"),
            "{missing}"
        );
        let not_bool = check("device.driver").unwrap_err();
        assert!(not_bool.contains("must return a bool"), "{not_bool}");
        let bad_quantity = check(r#"quantity("12xyz") == quantity("1")"#).unwrap_err();
        assert!(bad_quantity.contains("quantity"), "{bad_quantity}");
    }

    #[test]
    fn answers_are_kept_per_expression_and_device() {
        let mut s = Selectors::new(2);
        let e: Arc<str> = Arc::from(r#"device.attributes["gpu.nvidia.com"].index == 3"#);
        let d = gpu();
        assert_eq!(s.matches(&e, 0, &d), Ok(true));
        // The cached answer for device 0 stands even when asked with other content: a device's
        // answer is computed once per session.
        let mut other = d.clone();
        other.attributes.clear();
        assert_eq!(s.matches(&e, 0, &other), Ok(true));
        assert!(s.matches(&e, 1, &other).is_err());
        assert_eq!(s.programs.len(), 1);
    }

    #[test]
    fn devices_alike_share_answers_and_indices_never_mix() {
        let a = gpu();
        let mut other = gpu();
        other.driver = "other.example.com".into();
        let mut twin = gpu();
        twin.name = "gpu-4".into();
        // Index 0 differs from indices 1 and 2, which are alike.
        let devices = [other.clone(), a.clone(), twin.clone()];
        let mut s = Selectors::for_devices(&devices);
        let e: Arc<str> = Arc::from(r#"device.driver == "gpu.nvidia.com""#);
        assert_eq!(s.matches(&e, 2, &twin), Ok(true));
        assert_eq!(
            s.matches(&e, 0, &other),
            Ok(false),
            "not the answer of another content"
        );
        assert_eq!(s.matches(&e, 1, &a), Ok(true));
        assert_eq!(s.answered(), 2, "one evaluation per content");
    }

    #[test]
    fn selectors_that_could_exhaust_a_stack_are_compile_errors() {
        let deep_parens = format!("{}true{}", "(".repeat(200), ")".repeat(200));
        assert!(check(&deep_parens)
            .unwrap_err()
            .contains("nested more than"));
        let long_chain = format!("{}1 > 0", "1 + ".repeat(100));
        assert!(check(&long_chain).unwrap_err().contains("levels deep"));
        let too_long = format!("device.driver == \"{}\"", "x".repeat(MAX_LENGTH));
        assert!(check(&too_long).unwrap_err().contains("longer than"));
        // Brackets inside string literals are not nesting.
        let quoted = format!("device.driver != \"{}\"", "(".repeat(200));
        assert_eq!(check(&quoted), Ok(true));
        // A realistic selector is far from the limits.
        let real = r#"device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA") && device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0 && device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("500.0.0"))"#;
        assert_eq!(check(real), Ok(true));
    }

    #[test]
    fn semver_precedence_follows_the_spec() {
        let v = |s: &str| Semver::parse(s).unwrap();
        let order = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "2.0.0",
        ];
        for w in order.windows(2) {
            assert_eq!(v(w[0]).precedence(&v(w[1])), Ordering::Less, "{w:?}");
        }
        assert!(Semver::parse("01.2.3").is_none());
        assert!(Semver::parse("1.2").is_none());
        assert_eq!(v("1.2.3+build").precedence(&v("1.2.3")), Ordering::Equal);
    }
}
