//! Compiled Lua chunks, cached by their source: the frontmatter's here, and flemma-providers'
//! Lua templates through `flemma_config::LuaChunks`.
//!
//! Compiling is pure: the same source always gives the same bytecode. Evaluating is not (a
//! frontmatter may read `os.time`, a policy is asked per call), so every run still gets a
//! fresh state; what is kept is the bytecode, which that state loads instead of compiling
//! the source again. The bytecode is this process's own dump of a source it compiled, never
//! input: sources are always loaded as text (a frontmatter cannot pass bytecode in).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua};

/// The sources and bytecode the cache holds at most, together; past it the cache starts
/// again (frontmatters and template programs are small: this is thousands of them).
const MAX_BYTES: usize = 8 << 20;

#[derive(Default)]
struct Cache {
    /// Source → bytecode (with debug information: errors keep their chunk lines).
    chunks: HashMap<Box<str>, Arc<[u8]>>,
    bytes: usize,
}

/// A cache of the chunks compiled under one chunk name.
pub struct Chunks {
    name: &'static str,
    cache: OnceLock<Mutex<Cache>>,
}

impl std::fmt::Debug for Chunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunks")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Chunks {
    /// The cache of chunks named `name` (`=frontmatter`: errors read `frontmatter:3: …`;
    /// `=template` for templates).
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            cache: OnceLock::new(),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // The cache is only ever inserted into whole; a panic elsewhere leaves it usable.
        self.cache
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `source` as a function of `lua`, compiled once per process.
    ///
    /// # Errors
    ///
    /// Lua's syntax error for the source (not cached: it is compiled again next time).
    pub fn load(&self, lua: &Lua, source: &str) -> mlua::Result<Function> {
        let cached = self.cache().chunks.get(source).cloned();
        if let Some(bytecode) = cached {
            return lua
                .load(&*bytecode)
                .set_name(self.name)
                .set_mode(ChunkMode::Binary)
                .into_function();
        }
        let function = lua
            .load(source)
            .set_name(self.name)
            .set_mode(ChunkMode::Text)
            .into_function()?;
        let bytecode: Arc<[u8]> = function.dump(false).into();
        let mut cache = self.cache();
        let size = source.len() + bytecode.len();
        if cache.bytes + size > MAX_BYTES {
            cache.chunks.clear();
            cache.bytes = 0;
        }
        if size <= MAX_BYTES && cache.chunks.insert(source.into(), bytecode).is_none() {
            cache.bytes += size;
        }
        Ok(function)
    }

    /// How many chunks are cached (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cache().chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_chunk_runs_in_each_state_and_keeps_its_lines() {
        static CHUNKS: Chunks = Chunks::new("=test");
        let source = "x = (x or 0) + 1\nreturn x, nothing.here";
        for _ in 0..2 {
            let lua = Lua::new();
            lua.globals().set("x", 41).unwrap();
            let function = CHUNKS.load(&lua, source).unwrap();
            let error = function.call::<()>(()).unwrap_err().to_string();
            // The same line either way: the bytecode keeps its debug information.
            assert!(error.contains("test:2:"), "{error}");
            assert_eq!(lua.globals().get::<i64>("x").unwrap(), 42);
        }
        assert_eq!(CHUNKS.len(), 1);
    }
}
