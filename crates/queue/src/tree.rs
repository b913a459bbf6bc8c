//! The queue tree: which queue is whose parent (`Queue.spec.parent`), built once per session.
//!
//! Every queue hangs under `root`: the queue named `root` when one exists, else a virtual root
//! node past the last queue (Volcano creates a `root` Queue object; Caldera does not need one
//! to schedule). A queue whose parent does not exist, or whose parents form a cycle, is not
//! placed in the tree at all: it carries a problem (reported on its jobs) and is treated as
//! closed, never guessed into some other place. So are the queues below it.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The name of the queue every other queue hangs under.
pub const ROOT: &str = "root";

/// The parent/child structure of a session's queues. Node `i < queues` is queue `i` of the
/// session; a virtual root, when no queue is named `root`, is node `queues`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueTree {
    names: Vec<Arc<str>>,
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    /// Root first, the node itself excluded; empty for the root and for broken queues.
    ancestors: Vec<Vec<usize>>,
    problem: Vec<Option<(TreeProblem, String)>>,
    root: usize,
    queues: usize,
}

/// Why a queue is not in the tree, as a condition's or event's one-word reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TreeProblem {
    /// Its parents form a cycle.
    ParentCycle,
    /// It (or the queue at the top of its chain of parents) names a parent that does not
    /// exist.
    ParentNotFound,
    /// An ancestor is out of the tree for another of these reasons.
    AncestorNotInTree,
    /// The `root` queue names a parent.
    RootHasParent,
}

impl TreeProblem {
    /// The CamelCase reason.
    pub fn reason(self) -> &'static str {
        match self {
            TreeProblem::ParentCycle => "ParentCycle",
            TreeProblem::ParentNotFound => "ParentNotFound",
            TreeProblem::AncestorNotInTree => "AncestorNotInTree",
            TreeProblem::RootHasParent => "RootHasParent",
        }
    }
}

/// Where walking up from a queue got to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Unvisited,
    OnPath,
    Placed,
    Broken,
}

impl QueueTree {
    /// Builds the tree of `queues`, given as `(name, parent)` in the session's order (names
    /// unique). `parent: None` means a child of `root`.
    pub fn build(queues: &[(Arc<str>, Option<Arc<str>>)]) -> Self {
        let n = queues.len();
        let by_name: BTreeMap<&str, usize> = queues
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (&**name, i))
            .collect();
        let (root, nodes) = match by_name.get(ROOT) {
            Some(&r) => (r, n),
            None => (n, n + 1),
        };
        let mut names: Vec<Arc<str>> = queues.iter().map(|(name, _)| name.clone()).collect();
        if nodes > n {
            names.push(Arc::from(ROOT));
        }
        let mut tree = QueueTree {
            names,
            parent: vec![None; nodes],
            children: vec![Vec::new(); nodes],
            ancestors: vec![Vec::new(); nodes],
            problem: vec![None; nodes],
            root,
            queues: n,
        };
        // The named parent of each node, resolved; Err carries the missing name.
        let wanted = |i: usize| -> Result<Option<usize>, Arc<str>> {
            if i == root {
                return Ok(None);
            }
            match queues.get(i).and_then(|(_, p)| p.clone()) {
                None => Ok(Some(root)),
                Some(p) => match by_name.get(&*p) {
                    Some(&j) => Ok(Some(j)),
                    None if &*p == ROOT => Ok(Some(root)),
                    None => Err(p),
                },
            }
        };
        if root < n {
            if let Some(p) = queues[root].1.as_ref() {
                tree.problem[root] = Some((
                    TreeProblem::RootHasParent,
                    format!("the root queue cannot have a parent (spec.parent is {p})"),
                ));
            }
        }
        let mut mark = vec![Mark::Unvisited; nodes];
        mark[root] = Mark::Placed;
        for start in 0..nodes {
            if mark[start] != Mark::Unvisited {
                continue;
            }
            // Walk up until a placed or broken node, a missing parent, or a cycle.
            let mut path = vec![start];
            mark[start] = Mark::OnPath;
            let verdict: Result<(), (TreeProblem, String)> = loop {
                let Some(&top) = path.last() else {
                    break Ok(());
                };
                match wanted(top) {
                    Err(missing) => {
                        break Err((
                            TreeProblem::ParentNotFound,
                            format!(
                                "queue {} names parent {missing}, which does not exist",
                                tree.names[top]
                            ),
                        ))
                    }
                    Ok(None) => break Ok(()),
                    Ok(Some(p)) => match mark[p] {
                        Mark::Placed => break Ok(()),
                        Mark::Broken => {
                            break Err((
                                TreeProblem::AncestorNotInTree,
                                format!(
                                    "its ancestor {} is not in the tree: {}",
                                    tree.names[p],
                                    tree.problem(p).unwrap_or("broken")
                                ),
                            ))
                        }
                        Mark::OnPath => {
                            let at = path.iter().position(|&x| x == p).unwrap_or(0);
                            let mut cycle: Vec<&str> =
                                path[at..].iter().map(|&x| &*tree.names[x]).collect();
                            cycle.push(&tree.names[p]);
                            break Err((
                                TreeProblem::ParentCycle,
                                format!("parents form a cycle: {}", cycle.join(" → ")),
                            ));
                        }
                        Mark::Unvisited => {
                            mark[p] = Mark::OnPath;
                            path.push(p);
                        }
                    },
                }
            };
            match verdict {
                Ok(()) => {
                    // Place from the top of the path down, so parents are placed first.
                    for &x in path.iter().rev() {
                        let Ok(Some(p)) = wanted(x) else {
                            mark[x] = Mark::Placed;
                            continue;
                        };
                        let mut anc = tree.ancestors[p].clone();
                        anc.push(p);
                        tree.ancestors[x] = anc;
                        tree.parent[x] = Some(p);
                        mark[x] = Mark::Placed;
                    }
                }
                Err(why) => {
                    for &x in &path {
                        mark[x] = Mark::Broken;
                        tree.problem[x] = Some(why.clone());
                    }
                }
            }
        }
        for x in 0..nodes {
            if let Some(p) = tree.parent[x] {
                tree.children[p].push(x);
            }
        }
        tree
    }

    /// The tree of a snapshot's queues (`Queue::parent`).
    pub fn of(queues: &[caldera_model::Queue]) -> Self {
        Self::build(
            &queues
                .iter()
                .map(|q| (q.name.clone(), q.parent.clone()))
                .collect::<Vec<_>>(),
        )
    }

    /// A tree from `(name, parent)` pairs of string slices (tests and examples).
    pub fn named(queues: &[(&str, Option<&str>)]) -> Self {
        Self::build(
            &queues
                .iter()
                .map(|(n, p)| (Arc::from(*n), p.map(Arc::from)))
                .collect::<Vec<_>>(),
        )
    }

    /// A tree of depth 1: every queue a child of a virtual root (parents ignored). What a
    /// session without hierarchical queues sees.
    pub fn flat(queues: &[Arc<str>]) -> Self {
        let pairs: Vec<(Arc<str>, Option<Arc<str>>)> = queues
            .iter()
            .filter(|q| &***q != ROOT)
            .map(|q| (q.clone(), None))
            .collect();
        if pairs.len() == queues.len() {
            return Self::build(&pairs);
        }
        // A queue named root stays an ordinary queue in a flat tree.
        let n = queues.len();
        let mut tree = QueueTree {
            names: queues.iter().cloned().chain([Arc::from(ROOT)]).collect(),
            parent: vec![Some(n); n + 1],
            children: vec![Vec::new(); n + 1],
            ancestors: vec![vec![n]; n + 1],
            problem: vec![None; n + 1],
            root: n,
            queues: n,
        };
        tree.parent[n] = None;
        tree.ancestors[n].clear();
        tree.children[n] = (0..n).collect();
        tree
    }

    /// Number of nodes: the queues, plus the virtual root when no queue is named `root`.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// Whether the tree has no node (never: there is always a root).
    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// Number of the session's queues (nodes `0..queues()`).
    pub fn queues(&self) -> usize {
        self.queues
    }

    /// The root node.
    pub fn root(&self) -> usize {
        self.root
    }

    /// Whether the root is virtual (no Queue named `root`).
    pub fn virtual_root(&self) -> bool {
        self.root >= self.queues
    }

    /// Name of node `i`.
    pub fn name(&self, i: usize) -> &Arc<str> {
        &self.names[i]
    }

    /// The parent of node `i` (`None` for the root and for broken queues).
    pub fn parent(&self, i: usize) -> Option<usize> {
        self.parent[i]
    }

    /// The children of node `i`, in the session's queue order.
    pub fn children(&self, i: usize) -> &[usize] {
        &self.children[i]
    }

    /// The ancestors of node `i`, root first, `i` excluded.
    pub fn ancestors(&self, i: usize) -> &[usize] {
        &self.ancestors[i]
    }

    /// Depth of node `i` (the root is 0).
    pub fn depth(&self, i: usize) -> usize {
        self.ancestors[i].len()
    }

    /// Whether node `i` has no children: only leaves hold jobs in a hierarchy.
    pub fn is_leaf(&self, i: usize) -> bool {
        self.children[i].is_empty()
    }

    /// Why queue `i` is not in the tree (an unknown parent, a cycle, a broken ancestor).
    pub fn problem(&self, i: usize) -> Option<&str> {
        self.problem[i].as_ref().map(|(_, why)| why.as_str())
    }

    /// The kind of [`QueueTree::problem`].
    pub fn problem_kind(&self, i: usize) -> Option<TreeProblem> {
        self.problem[i].as_ref().map(|(kind, _)| *kind)
    }

    /// Every node, parents before children (root first, then by depth, then by index).
    pub fn top_down(&self) -> Vec<usize> {
        let mut order = vec![self.root];
        let mut at = 0;
        while at < order.len() {
            order.extend_from_slice(&self.children[order[at]]);
            at += 1;
        }
        order
    }

    /// The deepest common ancestor of `a` and `b` (a node counts as its own ancestor here).
    pub fn common_ancestor(&self, a: usize, b: usize) -> usize {
        // The paths root → a and root → b, walked side by side without building them (the
        // queue order asks this for every comparison).
        let step = |p: &[usize], own: usize, i: usize| match i.cmp(&p.len()) {
            Ordering::Less => Some(p[i]),
            Ordering::Equal => Some(own),
            Ordering::Greater => None,
        };
        let (pa, pb) = (&self.ancestors[a], &self.ancestors[b]);
        let mut common = self.root;
        for i in 0.. {
            match (step(pa, a, i), step(pb, b, i)) {
                (Some(x), Some(y)) if x == y => common = x,
                _ => break,
            }
        }
        common
    }

    /// Root first down to `i` itself.
    pub fn path(&self, i: usize) -> Vec<usize> {
        let mut p = self.ancestors[i].clone();
        p.push(i);
        p
    }

    /// The node on `i`'s path just below `above` (`i` itself when `above` is its parent or
    /// `i == above`).
    pub fn child_towards(&self, above: usize, i: usize) -> usize {
        let ancestors = &self.ancestors[i];
        ancestors
            .iter()
            .position(|&x| x == above)
            .and_then(|at| ancestors.get(at + 1).copied())
            .unwrap_or(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(qs: &[(&str, Option<&str>)]) -> QueueTree {
        QueueTree::named(qs)
    }

    #[test]
    fn parents_children_and_a_virtual_root() {
        let t = build(&[
            ("a", None),
            ("a1", Some("a")),
            ("a2", Some("a")),
            ("b", Some("root")),
        ]);
        assert_eq!(t.len(), 5);
        assert!(t.virtual_root());
        assert_eq!(t.root(), 4);
        assert_eq!(t.children(4), &[0, 3]);
        assert_eq!(t.children(0), &[1, 2]);
        assert_eq!(t.ancestors(2), &[4, 0]);
        assert!(t.is_leaf(1) && !t.is_leaf(0));
        assert_eq!(t.common_ancestor(1, 2), 0);
        assert_eq!(t.common_ancestor(1, 3), 4);
        assert_eq!(t.child_towards(4, 2), 0);
        assert_eq!(t.top_down(), vec![4, 0, 3, 1, 2]);
    }

    #[test]
    fn common_ancestor_and_child_towards_follow_the_paths() {
        // Every pair of a 3-level tree with a root object, against the paths' definitions.
        let t = build(&[
            ("root", None),
            ("d1", None),
            ("d2", Some("root")),
            ("g1", Some("d1")),
            ("g2", Some("d1")),
            ("g3", Some("d2")),
            ("l1", Some("g1")),
            ("l2", Some("g1")),
            ("l3", Some("g2")),
            ("l4", Some("g3")),
        ]);
        for a in 0..t.len() {
            for b in 0..t.len() {
                let (pa, pb) = (t.path(a), t.path(b));
                let common = pa
                    .iter()
                    .zip(&pb)
                    .take_while(|(x, y)| x == y)
                    .last()
                    .map_or(t.root(), |(x, _)| *x);
                assert_eq!(t.common_ancestor(a, b), common, "{a} {b}");
                let below = pa
                    .iter()
                    .position(|&x| x == b)
                    .and_then(|at| pa.get(at + 1).copied())
                    .unwrap_or(a);
                assert_eq!(t.child_towards(b, a), below, "{b} towards {a}");
            }
        }
    }

    #[test]
    fn a_root_queue_object_is_the_root() {
        let t = build(&[("a", None), ("root", None)]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.root(), 1);
        assert_eq!(t.parent(0), Some(1));
    }

    #[test]
    fn unknown_parents_and_cycles_are_reported_with_what_hangs_below() {
        let t = build(&[
            ("a", Some("b")),
            ("b", Some("a")),
            ("c", Some("nowhere")),
            ("d", Some("c")),
            ("e", Some("e")),
            ("f", None),
        ]);
        assert_eq!(t.problem(0), Some("parents form a cycle: a → b → a"));
        assert_eq!(t.problem(1), Some("parents form a cycle: a → b → a"));
        assert_eq!(
            t.problem(2),
            Some("queue c names parent nowhere, which does not exist")
        );
        assert!(t
            .problem(3)
            .is_some_and(|p| p.starts_with("its ancestor c is not in the tree")));
        assert_eq!(t.problem(4), Some("parents form a cycle: e → e"));
        assert_eq!(t.problem(5), None);
        assert_eq!(t.children(t.root()), &[5]);
        assert_eq!(t.parent(0), None);
    }

    #[test]
    fn flat_ignores_parents() {
        let names: Vec<Arc<str>> = ["a", "root"].into_iter().map(Arc::from).collect();
        let t = QueueTree::flat(&names);
        assert_eq!(t.root(), 2);
        assert_eq!(t.children(2), &[0, 1]);
    }
}
