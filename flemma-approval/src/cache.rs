//! The config resolver's compiled `tools.auto_approve` lists, by options generation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use flemma_config::{Config, GlobList};

/// How many shards; a generation's shard is `generation % SHARDS`.
const SHARDS: usize = 16;
/// How many lists one shard keeps before it drops its oldest.
const PER_SHARD: usize = 8;

/// Compiled lists keyed by [`Config::generation`], in shards of a few entries each.
///
/// Why this shape:
///
/// - **Keyed by generation.** A generation names one state of one `Config` (it is unique across
///   the process and changes on every change), so it is a complete key: the list never needs
///   comparing, and a conversation whose options did not change finds its list again however
///   many other conversations were decided in between. The single slot this replaces was
///   overwritten by each conversation in turn, so two alternating conversations recompiled on
///   every call.
/// - **Sharded read-write locks, no global lock.** A lookup takes only its shard's read lock,
///   which readers share: conversations never wait for one another on a hit, and two
///   conversations usually hit different shards (generations come from one counter), so they
///   do not even share a cache line (each shard is aligned to 64 bytes). The write lock of one
///   shard is taken only to insert a list compiled outside any lock, once per generation.
/// - **Bounded.** Every options change leaves its old generation behind; a shard keeps its
///   `PER_SHARD` newest insertions (`SHARDS * PER_SHARD` = 128 lists in all), so stale lists
///   go without a sweep. A conversation that fell out comes back at the cost of one compile.
/// - **Std only.** No concurrent-map crate: with a handful of entries per shard, a linear scan
///   under a shared lock is as fast as a hash lookup and needs no new dependency.
///
/// A thread-local cache was the alternative without any lock; it was not chosen because an
/// async host moves conversations between worker threads, so every thread would compile (and
/// keep) its own copy of every list.
#[derive(Debug, Default)]
pub(crate) struct ListCache {
    shards: [Shard; SHARDS],
    compiled: AtomicU64,
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard(RwLock<Vec<(u64, GlobList)>>);

impl ListCache {
    /// Runs `f` on the compiled `tools.auto_approve` list of `config`, compiling it on the
    /// first call for this generation.
    pub(crate) fn with<R>(&self, config: &Config, f: impl FnOnce(&GlobList) -> R) -> R {
        let generation = config.generation();
        let shard = &self.shards[(generation % SHARDS as u64) as usize].0;
        {
            let lists = shard.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, list)) = lists.iter().find(|(g, _)| *g == generation) {
                return f(list);
            }
        }
        let list = GlobList::new(config.list("tools.auto_approve").items);
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let answer = f(&list);
        let mut lists = shard.write().unwrap_or_else(PoisonError::into_inner);
        if !lists.iter().any(|(g, _)| *g == generation) {
            if lists.len() == PER_SHARD {
                lists.remove(0);
            }
            lists.push((generation, list));
        }
        answer
    }

    /// How many lists were compiled so far.
    pub(crate) fn compiled(&self) -> u64 {
        self.compiled.load(Ordering::Relaxed)
    }
}
