//! Reads: paged, selected lists and watches (from now, the current state, or a
//! resourceVersion within the history window), and the watch history's upkeep.

use super::*;

impl State {
    pub(crate) fn list(&self, id: ResourceId, query: &ListQuery) -> Result<ListPage, ApiError> {
        let d = def(id);
        let rs = &self.resources[id];
        let (resource_version, start) = match &query.continue_token {
            Some(token) => {
                let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
                let decoded: Value = hex_decode(token)
                    .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                    .ok_or_else(bad)?;
                let rv = decoded["rv"].as_u64().ok_or_else(bad)?;
                let ns = decoded["ns"].as_str().ok_or_else(bad)?.to_string();
                let name = decoded["name"].as_str().ok_or_else(bad)?.to_string();
                (rv, Bound::Excluded((ns, name)))
            }
            None => (
                self.rv,
                match &query.namespace {
                    Some(ns) if d.namespaced => Bound::Included((ns.clone(), String::new())),
                    _ => Bound::Unbounded,
                },
            ),
        };
        let in_namespace = |k: &Key| match &query.namespace {
            Some(ns) if d.namespaced => &k.0 == ns,
            _ => true,
        };
        let limit = query.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key: Option<&Key> = None;
        let mut more = false;
        if let (Some(name), None) = (query.fields.required_name(), &query.continue_token) {
            // A name-pinned selector is a point lookup, not a scan.
            let candidates: Vec<&Arc<Stored>> = match &query.namespace {
                Some(ns) if d.namespaced => rs
                    .objects
                    .get(&(ns.clone(), name.to_string()))
                    .into_iter()
                    .collect(),
                _ => rs
                    .objects
                    .iter()
                    .filter(|(k, _)| k.1 == name)
                    .map(|(_, v)| v)
                    .collect(),
            };
            items.extend(
                candidates
                    .into_iter()
                    .filter(|o| query.labels.matches(o) && query.fields.matches(o))
                    .cloned(),
            );
        } else {
            for (k, obj) in rs.objects.range((start, Bound::Unbounded)) {
                if !in_namespace(k) {
                    break;
                }
                if items.len() == limit {
                    more = true;
                    break;
                }
                last_key = Some(k);
                if query.labels.matches(obj) && query.fields.matches(obj) {
                    items.push(obj.clone());
                }
            }
        }
        let continue_token = match (more, last_key) {
            (true, Some((ns, name))) => {
                let token = json!({"rv": resource_version, "ns": ns, "name": name});
                Some(hex_encode(token.to_string().as_bytes()))
            }
            _ => None,
        };
        Ok(ListPage {
            items,
            resource_version,
            continue_token,
        })
    }

    pub(crate) fn watch(
        &mut self,
        id: ResourceId,
        from: WatchFrom,
    ) -> Result<WatchStart, ApiError> {
        let rv = self.rv;
        let rs = &mut self.resources[id];
        let replay = match from {
            WatchFrom::Now => Replay::Events(Vec::new()),
            WatchFrom::CurrentState => Replay::Objects(rs.objects.values().cloned().collect()),
            WatchFrom::After(n) => {
                if n < rs.window_start {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {n} ({})",
                        rs.window_start
                    )));
                }
                let first = rs.history.partition_point(|e| e.rv <= n);
                Replay::Events(rs.history.range(first..).cloned().collect())
            }
        };
        let (tx, live) = mpsc::unbounded_channel();
        rs.watchers.push(tx);
        Ok(WatchStart {
            replay,
            live,
            resource_version: rv,
        })
    }

    /// Forgets the watch history: any watch from a resourceVersion before now gets 410.
    pub(crate) fn compact(&mut self) {
        let rv = self.rv;
        for rs in &mut self.resources {
            rs.history.clear();
            rs.window_start = rv;
        }
    }

    /// Ends every open watch stream (clients see the stream close and re-watch).
    pub(crate) fn close_watches(&mut self) {
        for rs in &mut self.resources {
            rs.watchers.clear();
        }
    }

    pub(crate) fn active_watches(&mut self) -> usize {
        self.resources
            .iter_mut()
            .map(|rs| {
                rs.watchers.retain(|w| !w.is_closed());
                rs.watchers.len()
            })
            .sum()
    }
}

pub(super) fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}
