//! Where options were written, and what [`Config::diagnostics`] finds wrong with the names
//! they give (spec §5.4-§5.6).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{Config, Layer};
use crate::error::FinalizeIssue;

/// How serious a [`FinalizeIssue`] is (see [`FinalizeIssue::severity`]): the one severity of
/// every flemma diagnostic, owned by `flemma-ids` (the crate all flemma crates share) and the
/// same type as `flemma_ast::Severity`.
pub use flemma_ids::Severity;

/// Where an option was written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The conversation's frontmatter ([`Config::apply_frontmatter`]), at a 1-based line of
    /// the transcript: for Lua the line of the statement that wrote the option; for JSON the
    /// line of the option's key when it is found, else the line of the `"flemma"` key (or the
    /// frontmatter's first line).
    Frontmatter {
        /// The transcript line.
        line: u32,
    },
    /// An options file ([`Config::load_toml_file`]), at the 1-based line of the option's key.
    File {
        /// The file, as given to the loader.
        path: PathBuf,
        /// The line of the key, when the file's text gives it.
        line: Option<u32>,
    },
    /// A layer written in code or from a command line (the builder, `--set`): no place.
    Layer(Layer),
}

impl Origin {
    /// The layer the write went to.
    pub fn layer(&self) -> Layer {
        match self {
            Origin::Frontmatter { .. } => Layer::Frontmatter,
            Origin::File { .. } => Layer::Setup,
            Origin::Layer(layer) => *layer,
        }
    }
}

/// A [`FinalizeIssue`] and where the option that caused it was written.
///
/// `Display` puts the place first as the frontmatter's errors do (`line 3: Unknown tool
/// 'reed' -- did you mean 'read'?`, `flemma.toml:2: …`); an issue without a transcript or file
/// place is its message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OptionDiagnostic {
    /// What is wrong (its `Display` is the spec's text).
    pub issue: FinalizeIssue,
    /// Where it was written; for [`FinalizeIssue::PresetUnknownTool`] where the preset was
    /// defined, when it came from an options file (`None` for presets set in code).
    pub origin: Option<Origin>,
}

impl OptionDiagnostic {
    /// The issue's [`severity`](FinalizeIssue::severity).
    pub fn severity(&self) -> Severity {
        self.issue.severity()
    }

    /// The transcript line, when the frontmatter wrote the option.
    pub fn frontmatter_line(&self) -> Option<u32> {
        match self.origin {
            Some(Origin::Frontmatter { line }) => Some(line),
            _ => None,
        }
    }
}

impl fmt::Display for OptionDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(Origin::Frontmatter { line }) => write!(f, "line {line}: ")?,
            Some(Origin::File {
                path,
                line: Some(line),
            }) => write!(f, "{}:{line}: ", path.display())?,
            Some(Origin::File { path, line: None }) => write!(f, "{}: ", path.display())?,
            Some(Origin::Layer(_)) | None => {}
        }
        write!(f, "{}", self.issue)
    }
}

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

/// The line of every key of a TOML text, by path as [`Config::set`] writes it (tables joined
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
/// [`Config::set`] writes it. JSON parsers give no positions, so each key is looked for as
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

impl Config {
    /// What is wrong with the names the options give, checked against the registered tools
    /// and the presets (spec §5.4-§5.6), each with where it was written.
    ///
    /// Call it once every tool source has loaded (the finalize pass of spec §5.4): a glob
    /// that matches nothing yet is kept as written while sources load, and is expanded and
    /// checked here. Checked, in the order written:
    ///
    /// * every name and glob an operation on `tools` gives, in every layer — `set`, `append`,
    ///   `prepend` and `remove` alike, `$presets` expanded (`Unknown tool '<x>'`, with ` --
    ///   did you mean '<y>'?` when a registered name is close; `Glob pattern '<x>' matched no
    ///   tools`), so that a misspelled `:remove("wirte")` is an error, not a silent no-op;
    /// * `$preset` references that name no preset in `tools` and `tools.auto_approve`;
    /// * the tools the presets name ([`Presets::finalize`](crate::Presets::finalize));
    /// * tables of options for tools that are not registered (`tools.<name>.<key>`).
    ///
    /// Which of these stop a conversation is [`FinalizeIssue::severity`]; hosts usually go
    /// through `flemma_tools::ToolRegistry::evaluate`, which stops on the errors.
    ///
    /// ```
    /// use flemma_config::{Config, Layer, Origin, Severity};
    /// use flemma_ids::ToolName;
    ///
    /// let registered: Vec<ToolName> = ["bash", "read"].map(|n| ToolName::new(n).unwrap()).to_vec();
    /// let mut config = Config::new();
    /// config.apply_frontmatter("json", "{\n  \"flemma\": {\n    \"tools\": [\"bash\", \"reed\", \"mcp.*\"]\n  }\n}", 2)?;
    /// let found = config.diagnostics(&registered);
    /// let texts: Vec<String> = found.iter().map(ToString::to_string).collect();
    /// assert_eq!(texts, [
    ///     "line 4: Unknown tool 'reed' -- did you mean 'read'?",
    ///     "line 4: Glob pattern 'mcp.*' matched no tools",
    /// ]);
    /// assert_eq!(found[0].origin, Some(Origin::Frontmatter { line: 4 }));
    /// assert_eq!(found[0].severity(), Severity::Error);
    /// # Ok::<(), flemma_config::FrontmatterError>(())
    /// ```
    pub fn diagnostics(&self, registered: &[flemma_ids::ToolName]) -> Vec<OptionDiagnostic> {
        let mut found: Vec<OptionDiagnostic> = Vec::new();
        let mut add = |issue: FinalizeIssue, origin: Option<Origin>| {
            let diagnostic = OptionDiagnostic { issue, origin };
            if !found.contains(&diagnostic) {
                found.push(diagnostic);
            }
        };
        let is_registered = |name: &str| registered.iter().any(|r| *r == *name);
        let suggest = |name: &str| {
            crate::suggest::did_you_mean(name, registered.iter().map(flemma_ids::ToolName::as_str))
                .map(str::to_owned)
        };
        for path in ["tools", "tools.auto_approve"] {
            for (values, origin) in self.written_values(path) {
                for value in values {
                    let origin = Some(origin.clone());
                    if crate::listops::is_preset_ref(&value) {
                        // Known presets were expanded: what is left names none.
                        let suggestion =
                            crate::suggest::did_you_mean(&value, self.presets().names())
                                .map(str::to_owned);
                        add(
                            FinalizeIssue::UnknownPreset {
                                path: path.to_owned(),
                                name: value,
                                suggestion,
                            },
                            origin,
                        );
                    } else if path != "tools" {
                        // `tools.auto_approve` names are matched at approval time (spec §5.4).
                    } else if value.contains('*') {
                        let glob = crate::glob::GlobList::new([value.as_str()]);
                        if !registered.iter().any(|r| glob.is_match(r.as_str())) {
                            add(FinalizeIssue::GlobMatchedNothing { pattern: value }, origin);
                        }
                    } else if !is_registered(&value) {
                        let suggestion = suggest(&value);
                        add(
                            FinalizeIssue::UnknownTool {
                                name: value,
                                suggestion,
                            },
                            origin,
                        );
                    }
                }
            }
        }
        for issue in self.presets().finalize(registered) {
            let origin = match &issue {
                FinalizeIssue::PresetUnknownTool { preset, .. } => {
                    self.preset_origin(preset).cloned()
                }
                _ => None,
            };
            add(issue, origin);
        }
        for (tool, origin) in self.tool_tables() {
            if !is_registered(&tool) {
                let suggestion = suggest(&tool);
                add(
                    FinalizeIssue::UnknownToolOptions { tool, suggestion },
                    Some(origin),
                );
            }
        }
        found
    }

    /// [`Config::diagnostics`] without the places, each issue once.
    pub fn finalize(&self, registered: &[flemma_ids::ToolName]) -> Vec<FinalizeIssue> {
        let mut issues: Vec<FinalizeIssue> = Vec::new();
        for diagnostic in self.diagnostics(registered) {
            if !issues.contains(&diagnostic.issue) {
                issues.push(diagnostic.issue);
            }
        }
        issues
    }
}
