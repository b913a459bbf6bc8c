//! The session's view of pods for inter-pod constraints: the pods already on nodes (from the
//! snapshot) plus the members placed in this session, counted per topology domain.
//!
//! Counts are kept per term (keyed by the term's address inside its interned placement spec,
//! which is stable for the session), built on first use from the pods that term selects and
//! updated incrementally by every placement and undo, so a check is a few hash lookups rather
//! than a scan of pods. kube-scheduler 1.36 rules: `InterPodAffinity` (required terms, the
//! first-pod exception, existing pods' required anti-affinity; in scoring, the incoming pod's
//! preferred terms and existing pods' preferred terms and required affinity that match it) and
//! `PodTopologySpread`
//! (eligible nodes by `nodeAffinityPolicy`/`nodeTaintsPolicy`, domains of eligible nodes,
//! `minDomains`, terminating pods not counted).
//!
//! **Nominated pods.** Members held at a node for a preemptor ([`crate::reserve`]) count in
//! the checks of that node only, as kube-scheduler's `RunFilterPluginsWithNominatedPods` adds
//! the pods nominated to the node it filters (`addGENominatedPods`): a reservation is counted
//! exactly while it holds room — for jobs of equal or lower priority than its holder, never
//! for the holder itself. As there, a node must pass twice, with the nominated pods and
//! without them, so a nominated pod closes a node to others (its anti-affinity, theirs, the
//! spread skew) but never opens one (it does not satisfy a required affinity on its own, and
//! the spread is also checked without it). Scores do not count nominated pods (nor do
//! kube-scheduler's).

use caldera_model::selector::{untolerated_taint, SelectorOp};
use caldera_model::{
    Node, PlacedPod, PodAffinityTerm, PodConstraints, SpreadConstraint, Task, HOSTNAME,
};
use std::cell::OnceCell;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// No domain: the node lacks the topology label.
const NONE: u32 = u32::MAX;

/// Nodes grouped by the value of one label.
#[derive(Debug)]
struct Domains {
    /// Per node: its domain id, or [`NONE`].
    of_node: Vec<u32>,
    /// Per domain: its nodes.
    nodes: Vec<Vec<u32>>,
}

/// The domains counted pods' required anti-affinity closes to pods of one kind (one
/// [`crate::state::State::traits`] id: namespace and the labels selectors read), kept current
/// by every placement and undo.
#[derive(Debug, Clone)]
struct Closed {
    /// A pod of that kind (any: they look alike to every selector).
    namespace: Arc<str>,
    labels: Arc<BTreeMap<String, String>>,
    /// Per topology key: its domains, and how many anti-affinity terms close each domain.
    by_key: Vec<(String, Arc<Domains>, HashMap<u32, u32>)>,
}

impl Closed {
    fn closes(&self, node: u32) -> bool {
        self.by_key
            .iter()
            .any(|(_, d, closed)| closed.contains_key(&d.of_node[node as usize]))
    }

    /// Counts `delta` for `term` of a pod on `node` if it selects this kind.
    fn count(&mut self, term: &PodAffinityTerm, d: &Arc<Domains>, node: u32, delta: i64) {
        if !term.matches(&self.namespace, &self.labels) {
            return;
        }
        let id = d.of_node[node as usize];
        if id == NONE {
            return;
        }
        let at = match self
            .by_key
            .iter()
            .position(|(k, _, _)| *k == term.topology_key)
        {
            Some(i) => i,
            None => {
                self.by_key
                    .push((term.topology_key.clone(), d.clone(), HashMap::new()));
                self.by_key.len() - 1
            }
        };
        let closed = &mut self.by_key[at].2;
        let n = closed.entry(id).or_insert(0);
        *n = (i64::from(*n) + delta).max(0) as u32;
        if *n == 0 {
            closed.remove(&id);
        }
    }
}

/// Per topology key, per domain: Σ signed weights of existing pods' scoring terms that match a
/// pod.
type Attraction = Arc<Vec<(String, HashMap<u32, i64>)>>;

/// Nodes that count for a spread constraint, and the domains they make up.
type Eligible = (Arc<Vec<bool>>, Arc<Vec<u32>>);

/// The snapshot's pods by label, so a new counter starts from the pods its selector can match
/// (those carrying the label its narrowest requirement needs) instead of every pod. Keyed by
/// hashes: a collision only adds a pod the full match then rejects.
#[derive(Debug, Clone, Default)]
struct LabelIndex {
    /// hash(key, value) → indices into [`InterPod::pods`].
    pairs: HashMap<u64, Vec<u32>>,
    /// hash(key) → indices into [`InterPod::pods`].
    keys: HashMap<u64, Vec<u32>>,
}

fn label_hash(key: &str, value: Option<&str>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    value.hash(&mut h);
    h.finish()
}

impl LabelIndex {
    fn new(pods: &[Counted]) -> Self {
        let mut index = LabelIndex::default();
        for (i, p) in pods.iter().enumerate() {
            for (k, v) in p.labels.iter() {
                let pair = label_hash(k, Some(v));
                index.pairs.entry(pair).or_default().push(i as u32);
                index
                    .keys
                    .entry(label_hash(k, None))
                    .or_default()
                    .push(i as u32);
            }
        }
        index
    }

    /// The pods `selector` can match, ascending; `None` when it could match any pod.
    fn candidates(&self, selector: &caldera_model::LabelSelector) -> Option<Vec<u32>> {
        let r = selector.narrowest()?;
        let mut out: Vec<u32> = match r.op {
            SelectorOp::In => r
                .values
                .iter()
                .filter_map(|v| self.pairs.get(&label_hash(&r.key, Some(v))))
                .flatten()
                .copied()
                .collect(),
            SelectorOp::Exists => self
                .keys
                .get(&label_hash(&r.key, None))
                .cloned()
                .unwrap_or_default(),
            _ => return None,
        };
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}

/// A pod's (namespace, name).
type PodName = (Arc<str>, Arc<str>);

/// A pod counted by inter-pod constraints.
#[derive(Debug, Clone)]
struct Counted {
    namespace: Arc<str>,
    labels: Arc<BTreeMap<String, String>>,
    node: u32,
    terminating: bool,
    anti: Arc<[PodAffinityTerm]>,
    /// Terms that score pods coming to its domains, with signed weights.
    soft: Arc<[(i32, PodAffinityTerm)]>,
}

/// What a counter counts (a copy of the term; counters are keyed by the term's address inside
/// its interned placement spec, which the session's tasks keep alive and unique).
#[derive(Debug, Clone)]
enum Matcher {
    /// Pods matching an affinity term (terminating ones included).
    Term(PodAffinityTerm),
    /// Pods matching every one of a pod's required affinity terms (kube-scheduler's
    /// `podMatchesAllAffinityTerms`; terminating ones included), counted in the domains of
    /// one of them: a term is met by a pod that matches them all, not one per term.
    AllTerms(Arc<[PodAffinityTerm]>),
    /// Pods matching a spread constraint (not terminating) on nodes eligible for it.
    Spread(SpreadConstraint),
}

/// Matching pods per domain of one topology key.
#[derive(Debug, Clone)]
struct Counter {
    matcher: Matcher,
    domains: Arc<Domains>,
    /// Only pods on these nodes count (spread); `None` = all.
    eligible: Option<Arc<Vec<bool>>>,
    by_domain: HashMap<u32, u32>,
    total: u32,
    /// Smallest count over `present` domains, cached until counts change.
    min: Option<u32>,
    /// Domains of eligible nodes (spread only).
    present: Arc<Vec<u32>>,
}

/// Inter-pod accounting for one session. Reads take `&self` (lazily built counters live in
/// `RefCell`s); placements go through [`InterPod::place`] and [`InterPod::unplace`].
#[derive(Debug, Default, Clone)]
pub struct InterPod {
    pods: Vec<Counted>,
    /// Session placements: (task index, counted pod).
    placed: Vec<(usize, Counted)>,
    domains: RefCell<HashMap<String, Arc<Domains>>>,
    counters: RefCell<HashMap<usize, Counter>>,
    /// `pods` by label, built with the first counter.
    by_label: OnceCell<LabelIndex>,
    /// Per kind of task (its traits id): the domains counted pods' anti-affinity closes to it.
    forbidden: RefCell<HashMap<u32, Closed>>,
    /// How many counted pods (existing or placed) carry required anti-affinity.
    anti_pods: usize,
    /// Per (namespace, labels) of a task: what existing pods' scoring terms give each domain;
    /// invalidated when such terms come or go.
    attraction: RefCell<HashMap<(usize, usize), Attraction>>,
    /// How many counted pods carry scoring terms.
    soft_pods: usize,
    /// While set, [`InterPod::check`] passes everything: the session checks the constraints
    /// when it picks a node instead (members whose verdict depends on other nodes).
    deferred: Cell<bool>,
    /// Per node: the members held there now (see "Nominated pods" above), by task index.
    nominated: HashMap<u32, Vec<(usize, Counted)>>,
    /// (namespace, name) of each of `pods`, to find a task among them ([`InterPod::leave`]).
    names: Vec<PodName>,
    /// `pods` by (namespace, name), built on the first [`InterPod::leave`].
    by_name: OnceCell<HashMap<PodName, u32>>,
    /// Which of `pods` an eviction search has taken off their nodes (empty: none yet).
    away: Vec<bool>,
    /// How many of them carry required anti-affinity.
    nominated_anti: usize,
}

/// Two views are equal when they count the same pods (caches aside).
impl PartialEq for InterPod {
    fn eq(&self, other: &Self) -> bool {
        self.pods.len() == other.pods.len()
            && self.anti_pods == other.anti_pods
            && self.placed.len() == other.placed.len()
            && self
                .placed
                .iter()
                .zip(&other.placed)
                .all(|((a, p), (b, q))| a == b && p.node == q.node)
            && nominated_set(&self.nominated) == nominated_set(&other.nominated)
            && away_set(&self.away) == away_set(&other.away)
    }
}

/// The (node, task) pairs of nominated members, in order.
fn nominated_set(nominated: &HashMap<u32, Vec<(usize, Counted)>>) -> Vec<(u32, usize)> {
    let mut out: Vec<(u32, usize)> = nominated
        .iter()
        .flat_map(|(&n, here)| here.iter().map(move |(t, _)| (n, *t)))
        .collect();
    out.sort_unstable();
    out
}

/// The indexes of pods taken off their nodes.
fn away_set(away: &[bool]) -> Vec<usize> {
    away.iter()
        .enumerate()
        .filter_map(|(i, &a)| a.then_some(i))
        .collect()
}

/// The identity of a term: its address (see [`Matcher`]).
fn addr<T>(t: &T) -> usize {
    t as *const T as usize
}

impl InterPod {
    /// Builds the view from the snapshot's placed pods (those on unknown nodes are ignored).
    pub fn new(pods: &[PlacedPod], nodes: &[Node]) -> Self {
        let index = |name: &str| {
            nodes
                .binary_search_by(|n| (*n.name).cmp(name))
                .ok()
                .map(|i| i as u32)
        };
        let mut names = Vec::with_capacity(pods.len());
        let pods: Vec<Counted> = pods
            .iter()
            .filter_map(|p| {
                let c = Counted {
                    namespace: p.namespace.clone(),
                    labels: p.labels.clone(),
                    node: index(&p.node)?,
                    terminating: p.terminating,
                    anti: p.anti_affinity.clone(),
                    soft: p.scoring_terms.clone(),
                };
                names.push((p.namespace.clone(), p.name.clone()));
                Some(c)
            })
            .collect();
        let anti_pods = pods.iter().filter(|p| !p.anti.is_empty()).count();
        let soft_pods = pods.iter().filter(|p| !p.soft.is_empty()).count();
        InterPod {
            pods,
            anti_pods,
            soft_pods,
            names,
            ..Default::default()
        }
    }

    /// Defers (or stops deferring) constraint checks to pick time (see the field).
    pub fn defer(&self, on: bool) {
        self.deferred.set(on);
    }

    /// Whether some counted pod has terms that score pods coming to its domains: then even a
    /// member without constraints of its own has an inter-pod affinity score.
    pub fn scores_others(&self) -> bool {
        self.soft_pods > 0
    }

    /// Whether no pod carries required anti-affinity and nothing is counted: checks of
    /// unconstrained members can be skipped.
    pub fn quiet(&self) -> bool {
        self.anti_pods == 0 && self.nominated_anti == 0
    }

    /// Counts `task` (`t`), held at `node` for its preemptor, in that node's checks.
    pub fn nominate(&mut self, task: usize, t: &Task, node: u32) {
        let c = Counted {
            namespace: t.namespace.clone(),
            labels: t.labels.clone(),
            node,
            terminating: false,
            anti: t.spec.pods.anti_affinity.clone().into(),
            soft: Arc::from([]),
        };
        if !c.anti.is_empty() {
            self.nominated_anti += 1;
        }
        self.nominated.entry(node).or_default().push((task, c));
    }

    /// Undoes [`InterPod::nominate`] of `task` at `node`.
    pub fn unnominate(&mut self, task: usize, node: u32) {
        let Some(here) = self.nominated.get_mut(&node) else {
            return;
        };
        if let Some(i) = here.iter().rposition(|(t, _)| *t == task) {
            let (_, c) = here.remove(i);
            if !c.anti.is_empty() {
                self.nominated_anti -= 1;
            }
        }
        if here.is_empty() {
            self.nominated.remove(&node);
        }
    }

    fn domains(&self, key: &str, nodes: &[Node]) -> Arc<Domains> {
        if let Some(d) = self.domains.borrow().get(key) {
            return d.clone();
        }
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut d = Domains {
            of_node: Vec::with_capacity(nodes.len()),
            nodes: Vec::new(),
        };
        for (i, n) in nodes.iter().enumerate() {
            let id = match n.labels.get(key) {
                None => NONE,
                Some(v) => *ids.entry(v.as_str()).or_insert_with(|| {
                    d.nodes.push(Vec::new());
                    (d.nodes.len() - 1) as u32
                }),
            };
            if id != NONE {
                d.nodes[id as usize].push(i as u32);
            }
            d.of_node.push(id);
        }
        let d = Arc::new(d);
        self.domains.borrow_mut().insert(key.to_string(), d.clone());
        d
    }

    fn matches(m: &Matcher, p: &Counted) -> bool {
        match m {
            Matcher::Term(t) => t.matches(&p.namespace, &p.labels),
            Matcher::AllTerms(ts) => ts.iter().all(|t| t.matches(&p.namespace, &p.labels)),
            Matcher::Spread(s) => !p.terminating && s.counts(&p.namespace, &p.labels),
        }
    }

    fn all_counted(&self) -> impl Iterator<Item = &Counted> {
        self.pods
            .iter()
            .enumerate()
            .filter(|&(i, _)| !self.is_away(i))
            .map(|(_, p)| p)
            .chain(self.placed.iter().map(|(_, c)| c))
    }

    fn is_away(&self, i: usize) -> bool {
        self.away.get(i).copied().unwrap_or(false)
    }

    /// Takes existing pod `t` (running or terminating on its node since before the session)
    /// off its node while an eviction search considers it gone: its labels stop
    /// counting for others' terms and its own required anti-affinity and scoring terms stop
    /// applying, as kube-scheduler's preemption removes a victim from its NodeInfo before it
    /// filters the preemptor. Returns the nodes whose fit for others changed beyond its own.
    /// Nothing happens for a pod not counted (on a node the session does not know).
    pub fn leave(&mut self, t: &Task, nodes: &[Node]) -> Vec<u32> {
        self.set_away(t, true, nodes)
    }

    /// Undoes [`InterPod::leave`].
    pub fn come_back(&mut self, t: &Task, nodes: &[Node]) -> Vec<u32> {
        self.set_away(t, false, nodes)
    }

    fn set_away(&mut self, t: &Task, away: bool, nodes: &[Node]) -> Vec<u32> {
        let names = &self.names;
        let by_name = self.by_name.get_or_init(|| {
            names
                .iter()
                .enumerate()
                .map(|(i, k)| (k.clone(), i as u32))
                .collect()
        });
        let Some(&i) = by_name.get(&(t.namespace.clone(), t.name.clone())) else {
            return Vec::new();
        };
        let i = i as usize;
        if self.is_away(i) == away {
            return Vec::new();
        }
        if self.away.is_empty() {
            self.away = vec![false; self.pods.len()];
        }
        self.away[i] = away;
        let p = self.pods[i].clone();
        let mut touched = self.adjust(&p, if away { -1 } else { 1 }, nodes);
        touched.push(p.node);
        touched
    }

    /// Runs `f` on the counter for `m` over `key`, building it on first use (with the nodes
    /// `eligible` gives, for a spread constraint).
    fn with_counter<R>(
        &self,
        id: usize,
        m: impl FnOnce() -> Matcher,
        key: &str,
        eligible: impl FnOnce() -> Option<Eligible>,
        nodes: &[Node],
        f: impl FnOnce(&mut Counter) -> R,
    ) -> R {
        let mut counters = self.counters.borrow_mut();
        let c = counters.entry(id).or_insert_with(|| {
            let (eligible, present) = match eligible() {
                Some((e, p)) => (Some(e), p),
                None => (None, Arc::new(Vec::new())),
            };
            let mut c = Counter {
                matcher: m(),
                domains: self.domains(key, nodes),
                eligible,
                by_domain: HashMap::new(),
                total: 0,
                min: None,
                present,
            };
            self.count_all(&mut c);
            c
        });
        f(c)
    }

    /// Counts every counted pod `c` matches into a new counter.
    fn count_all(&self, c: &mut Counter) {
        let selector = match &c.matcher {
            Matcher::Term(t) => t.selector.as_ref(),
            // A pod matching every term matches the first.
            Matcher::AllTerms(ts) => ts.first().and_then(|t| t.selector.as_ref()),
            Matcher::Spread(s) => s.selector.as_ref(),
        };
        // Without a selector nothing matches.
        let Some(selector) = selector else {
            return;
        };
        let index = self.by_label.get_or_init(|| LabelIndex::new(&self.pods));
        match index.candidates(selector) {
            Some(list) => {
                for i in list {
                    if !self.is_away(i as usize) {
                        c.count(&self.pods[i as usize], 1);
                    }
                }
            }
            None => {
                for (i, p) in self.pods.iter().enumerate() {
                    if !self.is_away(i) {
                        c.count(p, 1);
                    }
                }
            }
        }
        for (_, p) in &self.placed {
            c.count(p, 1);
        }
    }

    /// Records `task` placed on `node`. Returns the nodes whose feasibility for others changed
    /// beyond `node` itself (the domains of its required anti-affinity terms wider than a node).
    pub fn place(&mut self, task: usize, t: &Task, node: u32, nodes: &[Node]) -> Vec<u32> {
        let c = Counted {
            namespace: t.namespace.clone(),
            labels: t.labels.clone(),
            node,
            terminating: false,
            anti: t.spec.pods.anti_affinity.clone().into(),
            soft: t.spec.pods.scoring_terms(),
        };
        let touched = self.adjust(&c, 1, nodes);
        self.placed.push((task, c));
        touched
    }

    /// Undoes [`InterPod::place`] of `task`.
    pub fn unplace(&mut self, task: usize, nodes: &[Node]) -> Vec<u32> {
        let Some(i) = self.placed.iter().rposition(|(t, _)| *t == task) else {
            return Vec::new();
        };
        let (_, c) = self.placed.remove(i);
        self.adjust(&c, -1, nodes)
    }

    fn adjust(&mut self, p: &Counted, delta: i64, nodes: &[Node]) -> Vec<u32> {
        for c in self.counters.get_mut().values_mut() {
            c.count(p, delta);
        }
        let mut touched = Vec::new();
        if !p.soft.is_empty() {
            if delta > 0 {
                self.soft_pods += 1;
            } else {
                self.soft_pods -= 1;
            }
            self.attraction.get_mut().clear();
            // Scores change on every node of a domain wider than the pod's own node.
            for (_, term) in p.soft.iter().filter(|(_, t)| t.topology_key != HOSTNAME) {
                let d = self.domains(&term.topology_key, nodes);
                let id = d.of_node[p.node as usize];
                if id != NONE {
                    touched.extend_from_slice(&d.nodes[id as usize]);
                }
            }
        }
        if !p.anti.is_empty() {
            if delta > 0 {
                self.anti_pods += 1;
            } else {
                self.anti_pods -= 1;
            }
            let terms: Vec<(&PodAffinityTerm, Arc<Domains>)> = p
                .anti
                .iter()
                .map(|t| (t, self.domains(&t.topology_key, nodes)))
                .collect();
            for closed in self.forbidden.get_mut().values_mut() {
                for (term, d) in &terms {
                    closed.count(term, d, p.node, delta);
                }
            }
            for (term, d) in &terms {
                let id = d.of_node[p.node as usize];
                if term.topology_key != HOSTNAME && id != NONE {
                    touched.extend_from_slice(&d.nodes[id as usize]);
                }
            }
        }
        touched
    }

    /// What counted pods' scoring terms that match `t` give each domain (kube-scheduler's
    /// `processExistingPod`: their preferred affinity +weight, preferred anti-affinity
    /// −weight, required affinity +`hardPodAffinityWeight`).
    fn attraction_for(&self, t: &Task, nodes: &[Node]) -> Attraction {
        let key = (
            Arc::as_ptr(&t.labels) as *const u8 as usize,
            Arc::as_ptr(&t.namespace) as *const u8 as usize,
        );
        if let Some(a) = self.attraction.borrow().get(&key) {
            return a.clone();
        }
        let mut by_key: BTreeMap<String, HashMap<u32, i64>> = BTreeMap::new();
        for p in self.all_counted() {
            for (w, term) in p.soft.iter() {
                if term.matches(&t.namespace, &t.labels) {
                    let d = self.domains(&term.topology_key, nodes);
                    let id = d.of_node[p.node as usize];
                    if id != NONE {
                        *by_key
                            .entry(term.topology_key.clone())
                            .or_default()
                            .entry(id)
                            .or_insert(0) += i64::from(*w);
                    }
                }
            }
        }
        let a = Arc::new(by_key.into_iter().collect::<Vec<_>>());
        self.attraction.borrow_mut().insert(key, a.clone());
        a
    }

    /// Domains that counted pods' required anti-affinity closes to `t` (kube-scheduler's
    /// symmetric rule), counted afresh.
    fn closed_to(&self, t: &Task, nodes: &[Node]) -> Closed {
        let mut closed = Closed {
            namespace: t.namespace.clone(),
            labels: t.labels.clone(),
            by_key: Vec::new(),
        };
        for p in self.all_counted().filter(|p| !p.anti.is_empty()) {
            for term in p.anti.iter() {
                closed.count(term, &self.domains(&term.topology_key, nodes), p.node, 1);
            }
        }
        closed
    }

    /// Whether counted pods' required anti-affinity keeps `t` off `node`. `kind` is `t`'s
    /// traits id: pods of one kind share the answer, kept current by placements and undos.
    fn closed_at(&self, t: &Task, kind: Option<u32>, node: u32, nodes: &[Node]) -> bool {
        let Some(kind) = kind else {
            return self.closed_to(t, nodes).closes(node);
        };
        if let Some(c) = self.forbidden.borrow().get(&kind) {
            return c.closes(node);
        }
        let closed = self.closed_to(t, nodes);
        let answer = closed.closes(node);
        self.forbidden.borrow_mut().insert(kind, closed);
        answer
    }

    /// The filter: existing pods' anti-affinity, the task's required affinity and
    /// anti-affinity, and its `DoNotSchedule` spread constraints, on node index `node`.
    /// `affinity` and `spread` switch those checks (Volcano's `predicate.*Enable`). `kind` is
    /// the task's [`crate::state::State::traits`] id when known (answers are shared by kind).
    ///
    /// With members nominated to `node` (see "Nominated pods" above) the node must pass with
    /// them counted and without them.
    pub fn check(
        &self,
        t: &Task,
        kind: Option<u32>,
        node: u32,
        nodes: &[Node],
        affinity: bool,
        spread: bool,
    ) -> Result<(), String> {
        if self.deferred.get() {
            return Ok(());
        }
        if let Some(here) = self.nominated.get(&node) {
            let extra: Vec<&Counted> = here.iter().map(|(_, c)| c).collect();
            self.check_with(t, kind, node, nodes, affinity, spread, &extra)?;
        }
        self.check_with(t, kind, node, nodes, affinity, spread, &[])
    }

    /// [`InterPod::check`] with `extra` pods counted on `node` besides the counted ones.
    #[allow(clippy::too_many_arguments)] // the check's switches, plus the pass's extra pods
    fn check_with(
        &self,
        t: &Task,
        kind: Option<u32>,
        node: u32,
        nodes: &[Node],
        affinity: bool,
        spread: bool,
        extra: &[&Counted],
    ) -> Result<(), String> {
        let has_key = |key: &str| nodes[node as usize].labels.contains_key(key);
        if affinity
            && ((self.anti_pods > 0 && self.closed_at(t, kind, node, nodes))
                || extra.iter().any(|p| {
                    p.anti.iter().any(|term| {
                        has_key(&term.topology_key) && term.matches(&t.namespace, &t.labels)
                    })
                }))
        {
            return Err("node(s) didn't satisfy existing pods anti-affinity rules".into());
        }
        let c = &t.spec.pods;
        if c.is_empty() {
            return Ok(());
        }
        if affinity && !c.affinity.is_empty() && !self.affinity_ok(t, c, node, nodes, extra) {
            return Err("node(s) didn't match pod affinity rules".into());
        }
        for term in c.anti_affinity.iter().filter(|_| affinity) {
            let n = self.with_counter(
                addr(term),
                || Matcher::Term(term.clone()),
                &term.topology_key,
                || None,
                nodes,
                |c| c.in_domain_of(node),
            );
            let nominated = extra
                .iter()
                .filter(|p| term.matches(&p.namespace, &p.labels))
                .count() as u32;
            if n.is_some_and(|n| n + nominated > 0) {
                return Err("node(s) didn't match pod anti-affinity rules".into());
            }
        }
        for s in c.spread.iter().filter(|s| spread && s.hard) {
            // `None`: the node lacks the constraint's key.
            let over = self.with_counter(
                addr(s),
                || Matcher::Spread(s.clone()),
                &s.topology_key,
                || Some(self.eligible(t, s, nodes)),
                nodes,
                |c| {
                    let mut here = c.in_domain_of(node)?;
                    // Nominated pods here that the constraint counts, on a node it counts.
                    let nominated = if c.eligible.as_ref().is_none_or(|e| e[node as usize]) {
                        extra
                            .iter()
                            .filter(|p| InterPod::matches(&c.matcher, p))
                            .count() as u32
                    } else {
                        0
                    };
                    let mut min = if nominated == 0 {
                        c.min_count()
                    } else {
                        let id = c.domains.of_node[node as usize];
                        let min = c
                            .present
                            .iter()
                            .map(|&d| {
                                let n = c.by_domain.get(&d).copied().unwrap_or(0);
                                if d == id {
                                    n + nominated
                                } else {
                                    n
                                }
                            })
                            .min()
                            .unwrap_or(0);
                        here += nominated;
                        min
                    };
                    if s.min_domains.is_some_and(|m| (c.present.len() as u32) < m) {
                        min = 0;
                    }
                    let self_match = u32::from(s.counts(&t.namespace, &t.labels));
                    Some(here + self_match > min + s.max_skew)
                },
            );
            match over {
                None => return Err(
                    "node(s) didn't match pod topology spread constraints (missing required label)"
                        .into(),
                ),
                Some(true) => {
                    return Err("node(s) didn't match pod topology spread constraints".into())
                }
                Some(false) => {}
            }
        }
        Ok(())
    }

    fn affinity_ok(
        &self,
        t: &Task,
        c: &PodConstraints,
        node: u32,
        nodes: &[Node],
        extra: &[&Counted],
    ) -> bool {
        let mut all_here = true;
        let mut none_anywhere = true;
        // Nominated pods here matching every term (they count in every term's domain here).
        let nominated = extra
            .iter()
            .filter(|p| {
                c.affinity
                    .iter()
                    .all(|term| term.matches(&p.namespace, &p.labels))
            })
            .count() as u32;
        for term in &c.affinity {
            let (mut here, mut total) = self.with_counter(
                addr(term),
                || Matcher::AllTerms(c.affinity.iter().cloned().collect()),
                &term.topology_key,
                || None,
                nodes,
                |c| (c.in_domain_of(node), c.total),
            );
            if let Some(n) = here.as_mut() {
                *n += nominated;
                total += nominated;
            }
            if total > 0 {
                none_anywhere = false;
            }
            if here.is_none_or(|n| n == 0) {
                all_here = false;
            }
        }
        if all_here {
            return true;
        }
        // The first pod of a group whose affinity selects itself may go anywhere the topology
        // keys exist, as long as no pod matches all terms yet.
        none_anywhere
            && c.affinity.iter().all(|term| {
                term.matches(&t.namespace, &t.labels)
                    && nodes[node as usize].labels.contains_key(&term.topology_key)
            })
    }

    /// Nodes that count for spread constraint `s` of `t` (`nodeAffinityPolicy`,
    /// `nodeTaintsPolicy`, and every hard constraint's key present), and their domains.
    fn eligible(&self, t: &Task, s: &SpreadConstraint, nodes: &[Node]) -> Eligible {
        // A node has a key when it lies in one of the key's domains.
        let keys: Vec<Arc<Domains>> = t
            .spec
            .pods
            .spread
            .iter()
            .filter(|c| c.hard == s.hard)
            .map(|c| self.domains(&c.topology_key, nodes))
            .collect();
        let d = self.domains(&s.topology_key, nodes);
        let mut eligible = vec![false; nodes.len()];
        let mut present = vec![false; d.nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            let ok = keys.iter().all(|k| k.of_node[i] != NONE)
                && (!s.honor_node_affinity || t.spec.matches_node(&n.name, &n.labels))
                && (!s.honor_taints || untolerated_taint(&n.taints, &t.spec.tolerations).is_none());
            if ok {
                eligible[i] = true;
                if let Some(p) = present.get_mut(d.of_node[i] as usize) {
                    *p = true;
                }
            }
        }
        let present: Vec<u32> = (0..d.nodes.len() as u32)
            .filter(|&id| present[id as usize])
            .collect();
        (Arc::new(eligible), Arc::new(present))
    }

    /// Preferred pod affinity/anti-affinity: Σ weight × matching pods in the node's domain
    /// (anti-affinity negative), plus what counted pods' own scoring terms that match the pod
    /// give the node's domains (see `attraction_for`), squashed into 0..=1 (0.5 = neutral).
    pub fn affinity_score(&self, t: &Task, node: u32, nodes: &[Node]) -> f64 {
        let c = &t.spec.pods;
        let own = !c.preferred_affinity.is_empty() || !c.preferred_anti_affinity.is_empty();
        if !own && self.soft_pods == 0 {
            return 0.5;
        }
        let mut raw = 0.0;
        let mut scale = 0.0;
        for (sign, terms) in [
            (1.0, &c.preferred_affinity),
            (-1.0, &c.preferred_anti_affinity),
        ] {
            for (w, term) in terms {
                let n = self.with_counter(
                    addr(term),
                    || Matcher::Term(term.clone()),
                    &term.topology_key,
                    || None,
                    nodes,
                    |c| c.in_domain_of(node).unwrap_or(0),
                );
                raw += sign * f64::from(*w) * f64::from(n);
                scale += f64::from(*w).abs();
            }
        }
        if self.soft_pods > 0 {
            for (key, by_domain) in self.attraction_for(t, nodes).iter() {
                let d = self.domains(key, nodes);
                let id = d.of_node[node as usize];
                if id != NONE {
                    raw += by_domain.get(&id).copied().unwrap_or(0) as f64;
                }
            }
        }
        0.5 + 0.5 * raw / (raw.abs() + scale.max(1.0))
    }

    /// `ScheduleAnyway` spread: fewer matching pods in the node's domain scores higher, each
    /// constraint weighted by ln(domains + 2) as kube-scheduler does; in 0..=1.
    pub fn spread_score(&self, t: &Task, node: u32, nodes: &[Node]) -> f64 {
        let soft: Vec<&SpreadConstraint> = t.spec.pods.spread.iter().filter(|s| !s.hard).collect();
        if soft.is_empty() {
            return 1.0;
        }
        let (mut score, mut weights) = (0.0, 0.0);
        for s in soft {
            let (here, total, domains, eligible_here) = self.with_counter(
                addr(s),
                || Matcher::Spread(s.clone()),
                &s.topology_key,
                || Some(self.eligible(t, s, nodes)),
                nodes,
                |c| {
                    (
                        c.in_domain_of(node),
                        c.total,
                        c.present.len().max(1) as f64,
                        c.eligible.as_ref().is_none_or(|e| e[node as usize]),
                    )
                },
            );
            let w = (domains + 2.0).ln();
            weights += w;
            // A node without the key, or outside the counted nodes, scores lowest.
            if here.is_some() && eligible_here {
                let here = f64::from(here.unwrap_or(0));
                score += w * (1.0 - here / (f64::from(total) + 1.0));
            }
        }
        score / weights
    }
}

impl Counter {
    /// Adds `delta` for `p` if it matches and sits on a counted node.
    fn count(&mut self, p: &Counted, delta: i64) {
        let id = self.domains.of_node[p.node as usize];
        if id == NONE {
            return;
        }
        if let Some(e) = &self.eligible {
            if !e.get(p.node as usize).copied().unwrap_or(false) {
                return;
            }
        }
        if !InterPod::matches(&self.matcher, p) {
            return;
        }
        let n = self.by_domain.entry(id).or_insert(0);
        *n = (i64::from(*n) + delta).max(0) as u32;
        self.total = (i64::from(self.total) + delta).max(0) as u32;
        self.min = None;
    }

    /// Matching pods in `node`'s domain; `None` when the node lacks the key.
    fn in_domain_of(&self, node: u32) -> Option<u32> {
        let id = self.domains.of_node[node as usize];
        (id != NONE).then(|| self.by_domain.get(&id).copied().unwrap_or(0))
    }

    /// The smallest count over the domains of eligible nodes.
    fn min_count(&mut self) -> u32 {
        if let Some(m) = self.min {
            return m;
        }
        let m = self
            .present
            .iter()
            .map(|id| self.by_domain.get(id).copied().unwrap_or(0))
            .min()
            .unwrap_or(0);
        self.min = Some(m);
        m
    }
}
