//! A small least-recently-used cache bounded by bytes: the mount keeps the
//! blobs it read (verified plaintext) and the trees it decoded here, so a
//! file read in kernel-sized pieces fetches each chunk from its pack once.

use crate::id::Id;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// What is kept, keyed by blob id, with its weight in bytes.
struct Inner<V> {
    map: HashMap<Id, (Arc<V>, u64, u64)>,
    /// Use tick → id, oldest first.
    order: BTreeMap<u64, Id>,
    tick: u64,
    bytes: u64,
}

/// An LRU cache of at most `limit` bytes (a single value larger than the
/// limit is not kept).
pub struct ByteLru<V> {
    inner: Mutex<Inner<V>>,
    limit: u64,
}

impl<V> ByteLru<V> {
    /// An empty cache of at most `limit` bytes.
    pub fn new(limit: u64) -> Self {
        ByteLru {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                order: BTreeMap::new(),
                tick: 0,
                bytes: 0,
            }),
            limit,
        }
    }

    /// The value for `id`, marking it as just used.
    pub fn get(&self, id: &Id) -> Option<Arc<V>> {
        let mut g = self.inner.lock().ok()?;
        let inner = &mut *g;
        inner.tick += 1;
        let tick = inner.tick;
        let (v, _, used) = inner.map.get_mut(id)?;
        inner.order.remove(used);
        *used = tick;
        inner.order.insert(tick, *id);
        Some(v.clone())
    }

    /// Keeps `v` (weighing `weight` bytes), dropping the least recently
    /// used values until the total fits.
    pub fn put(&self, id: Id, v: Arc<V>, weight: u64) {
        if weight > self.limit {
            return;
        }
        let Ok(mut g) = self.inner.lock() else { return };
        let inner = &mut *g;
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((_, w, used)) = inner.map.insert(id, (v, weight, tick)) {
            inner.order.remove(&used);
            inner.bytes -= w;
        }
        inner.order.insert(tick, id);
        inner.bytes += weight;
        while inner.bytes > self.limit {
            let Some((_, old)) = inner.order.pop_first() else {
                break;
            };
            if let Some((_, w, _)) = inner.map.remove(&old) {
                inner.bytes -= w;
            }
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.inner.lock().map(|g| g.bytes).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> Id {
        Id::from_hex(&format!("{n:02x}").repeat(32)).unwrap()
    }

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let c = ByteLru::new(100);
        c.put(id(1), Arc::new(1), 40);
        c.put(id(2), Arc::new(2), 40);
        assert!(c.get(&id(1)).is_some());
        c.put(id(3), Arc::new(3), 40);
        assert!(c.get(&id(2)).is_none(), "the least recently used went");
        assert_eq!(c.get(&id(1)).as_deref(), Some(&1));
        assert_eq!(c.get(&id(3)).as_deref(), Some(&3));
        assert_eq!(c.bytes(), 80);
        c.put(id(4), Arc::new(4), 101);
        assert!(c.get(&id(4)).is_none(), "too large to keep");
        c.put(id(1), Arc::new(5), 10);
        assert_eq!(c.bytes(), 50);
        assert_eq!(c.get(&id(1)).as_deref(), Some(&5));
    }
}
