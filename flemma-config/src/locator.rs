//! Where the writes being made come from, and the lines of the keys of an options text.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::diagnostic::Origin;
use crate::layer::Layer;

/// Where the writes being made come from: set by the loaders for the time they write, so that
/// every logged write keeps its [`Origin`].
#[derive(Debug, Clone, Default)]
pub(crate) enum Locator {
    /// Code or a command line: the origin is the layer.
    #[default]
    Layer,
    /// The frontmatter: the line of each written path's key, else `fallback`.
    Frontmatter {
        keys: Arc<BTreeMap<String, u32>>,
        fallback: u32,
    },
    /// An options file: the line of each written path's key.
    File {
        path: PathBuf,
        keys: Arc<BTreeMap<String, u32>>,
    },
}

impl Locator {
    /// Every write at one transcript line (a Lua statement).
    #[cfg(feature = "lua")]
    pub(crate) fn line(line: u32) -> Self {
        Locator::Frontmatter {
            keys: Arc::default(),
            fallback: line,
        }
    }

    /// The origin of a write to `written` (the path as written, before aliases) in `layer`.
    pub(crate) fn origin(&self, layer: Layer, written: &str) -> Origin {
        match self {
            Locator::Layer => Origin::Layer(layer),
            Locator::Frontmatter { keys, fallback } => Origin::Frontmatter {
                line: key_line(keys, written).unwrap_or(*fallback),
            },
            Locator::File { path, keys } => Origin::File {
                path: path.clone(),
                line: key_line(keys, written),
            },
        }
    }
}

/// The line of `written`'s key, else of the closest table above it that has one.
fn key_line(keys: &BTreeMap<String, u32>, written: &str) -> Option<u32> {
    if let Some(line) = keys.get(written) {
        return Some(*line);
    }
    let segments = crate::path::split(written).ok()?;
    (1..segments.len()).rev().find_map(|n| {
        let parent = segments[..n]
            .iter()
            .fold(String::new(), |path, s| crate::path::join(&path, s));
        keys.get(&parent).copied()
    })
}

/// The byte offsets where the lines of a text start.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(at, _)| at + 1))
        .collect()
}

/// The 1-based line of a byte offset, given the [`line_starts`].
fn line_of(starts: &[usize], offset: usize) -> u32 {
    let line = starts.partition_point(|start| *start <= offset);
    u32::try_from(line.max(1)).unwrap_or(u32::MAX)
}

/// JSON frontmatter larger than this is not searched for key lines (each key would be looked
/// for through the whole text): its diagnostics point at the `"flemma"` key.
const JSON_SEARCH_BYTES: usize = 256 << 10;
/// At most this many keys of a JSON frontmatter are looked for.
const JSON_SEARCH_KEYS: usize = 256;

/// The line of every key of a TOML text, by path as [`Config::set`](crate::Config::set) writes it (tables joined
/// with [`crate::path::join`]); empty when the text does not parse.
pub(crate) fn toml_key_lines(text: &str) -> BTreeMap<String, u32> {
    fn walk(
        table: &toml::de::DeTable<'_>,
        prefix: &str,
        starts: &[usize],
        out: &mut BTreeMap<String, u32>,
    ) {
        for (key, value) in table {
            let path = crate::path::join(prefix, key.get_ref());
            out.entry(path.clone())
                .or_insert_with(|| line_of(starts, key.span().start));
            if let toml::de::DeValue::Table(child) = value.get_ref() {
                walk(child, &path, starts, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Ok(table) = toml::de::DeTable::parse(text) {
        walk(table.get_ref(), "", &line_starts(text), &mut out);
    }
    out
}

/// The transcript line of every key of a JSON frontmatter's `"flemma"` object, by path as
/// [`Config::set`](crate::Config::set) writes it. JSON parsers give no positions, so each key is looked for as
/// `"key":` on the lines after its parent's key, in document order: a good guess for the
/// frontmatter people write (one key a line), never an error when it guesses wrong.
pub(crate) fn json_key_lines(
    code: &str,
    first_line: u32,
    from: usize,
    options: &Map<String, Value>,
) -> BTreeMap<String, u32> {
    fn walk(
        lines: &[&str],
        from: usize,
        prefix: &str,
        object: &Map<String, Value>,
        first_line: u32,
        out: &mut BTreeMap<String, u32>,
    ) -> usize {
        let mut cursor = from;
        for (key, value) in object {
            if out.len() >= JSON_SEARCH_KEYS {
                break;
            }
            let Ok(quoted) = serde_json::to_string(key) else {
                continue;
            };
            let found = (cursor..lines.len()).find(|&i| holds_key(lines[i], &quoted));
            let Some(at) = found else { continue };
            let path = crate::path::join(prefix, key);
            out.insert(
                path.clone(),
                first_line + u32::try_from(at).unwrap_or(u32::MAX - first_line),
            );
            cursor = at;
            if let Value::Object(child) = value {
                cursor = walk(lines, at, &path, child, first_line, out);
            }
        }
        cursor
    }
    let mut out = BTreeMap::new();
    if code.len() <= JSON_SEARCH_BYTES {
        let lines: Vec<&str> = code.lines().collect();
        walk(&lines, from, "", options, first_line, &mut out);
    }
    out
}

/// Whether a line holds `quoted` (a JSON string) as an object key: followed by a `:`.
fn holds_key(line: &str, quoted: &str) -> bool {
    line.match_indices(quoted)
        .any(|(at, _)| line[at + quoted.len()..].trim_start().starts_with(':'))
}
