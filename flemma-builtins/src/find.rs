//! The built-in `find`: files by glob pattern, printed as the Flemma plugin's `fd`
//! backend prints them (relative paths, sorted), run in process with ripgrep's crates.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_schema::builtin::inputs::FindInput;
use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkState;
use serde_json::Value;

use super::search::{self, Ended, Root, Shared};
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;
use flemma_core::truncate::{Limits, truncate_head};

/// Files listed when the call gives no `limit`.
pub(crate) const DEFAULT_LIMIT: usize = 500;

/// `tool.find.no_matches`
const NO_MATCHES: &str = "No files found matching pattern.";

/// `tool.find.footer_limited`
fn footer_limited(count: usize) -> String {
    let noun = if count == 1 { "entry" } else { "entries" };
    format!("[Results limited to {count} {noun}. Narrow your pattern for more specific results.]")
}

/// `tool.find.footer_truncated`
fn footer_truncated(shown: usize, total: usize) -> String {
    format!(
        "[Showing {shown} of {total} results (truncated). Narrow your pattern for more specific results.]"
    )
}

/// The built-in `find`: lists files whose name matches a glob (`*.lua`), or whose path does
/// when the pattern has a `/` (`src/**/*.tsx`).
///
/// Like `fd --type f --glob`: `.gitignore` (inside a Git repository), `.ignore` and
/// `.fdignore` are respected, hidden files and `tools.find.exclude` skipped, and a pattern
/// without capital letters matches case-insensitively. The walk runs in parallel and stops at
/// the `limit` (default 500), the call's timeout or its cancellation; paths are printed
/// relative to the working directory, sorted.
#[derive(Debug, Clone)]
pub struct Find {
    definition: ToolDefinition,
}

impl Find {
    /// The tool with its built-in definition (flemma-schema's table).
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`flemma_schema::SchemaError`] otherwise.
    pub fn new() -> Result<Self, flemma_schema::SchemaError> {
        ToolDefinition::from_builtin(&flemma_schema::builtin::find())
            .map(|definition| Self { definition })
    }
}

/// What a file must match.
#[derive(Debug, Clone)]
enum Pattern {
    /// Its name (`*.lua`).
    Name(GlobMatcher),
    /// Its path below the walk root (`tests/**/*.lua` for `*/tests/*.lua` after a literal
    /// prefix was taken off).
    Path(GlobMatcher),
}

impl Pattern {
    fn is_match(&self, path: &Path, root: &Path) -> bool {
        match self {
            Pattern::Name(glob) => path.file_name().is_some_and(|name| glob.is_match(name)),
            Pattern::Path(glob) => path.strip_prefix(root).is_ok_and(|rel| glob.is_match(rel)),
        }
    }
}

/// Splits a pattern as the Flemma plugin's `fd` backend does: a pattern with a `/` is a directory
/// prefix and a file-name glob, and `fd` looks for the name anywhere below the prefix. The
/// prefix's leading literal directories become part of the walk root (`src/`); what is left of
/// it (`*/tests/`) must match the directories between the root and the file.
fn parse(pattern: &str) -> Result<(PathBuf, Pattern), String> {
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    let insensitive = !pattern.chars().any(char::is_uppercase);
    let glob = |text: &str, literal_separator: bool| {
        GlobBuilder::new(text)
            .case_insensitive(insensitive)
            .literal_separator(literal_separator)
            .backslash_escape(true)
            .build()
            .map(|g| g.compile_matcher())
            .map_err(|error| search::invalid_glob(pattern, &error))
    };
    let Some((prefix, name)) = pattern.rsplit_once('/') else {
        return Ok((PathBuf::new(), Pattern::Name(glob(pattern, false)?)));
    };
    let name = if name.is_empty() { "*" } else { name };
    let mut literal = PathBuf::new();
    let mut rest = Vec::new();
    for part in prefix.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if rest.is_empty() && !part.contains(['*', '?', '[', '{', '\\']) {
            literal.push(part);
        } else {
            rest.push(part);
        }
    }
    if rest.is_empty() {
        return Ok((literal, Pattern::Name(glob(name, false)?)));
    }
    let path_glob = format!("{}/**/{name}", rest.join("/"));
    Ok((literal, Pattern::Path(glob(&path_glob, true)?)))
}

#[async_trait::async_trait]
impl Tool for Find {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let input = match FindInput::from_call(&input) {
            Ok(input) => input,
            Err(missing) => return ToolOutput::error(crate::messages::missing(missing)),
        };
        let (prefix, matcher) = match parse(&input.pattern) {
            Ok(parsed) => parsed,
            Err(error) => return ToolOutput::error(error),
        };
        let mut root = Root::new(input.path.as_deref(), ctx);
        if !prefix.as_os_str().is_empty() {
            let display = match root.display.as_str() {
                "/" => format!("/{}", prefix.display()),
                base => format!("{base}/{}", prefix.display()),
            };
            root = Root {
                path: root.path.join(&prefix),
                display,
            };
        }
        // `fd` exits with 1 when its search path is not a directory: no results.
        if !root.path.is_dir() {
            return ToolOutput::text(NO_MATCHES);
        }
        let overrides = match search::overrides(&root.path, None, &ctx.options().tools.find.exclude)
        {
            Ok(overrides) => overrides,
            Err(error) => return ToolOutput::error(error),
        };
        let limit = search::limit(input.limit, DEFAULT_LIMIT, f64::floor);
        let shared = Shared::for_call(limit, ctx);
        let walk = {
            let shared = Arc::clone(&shared);
            let root = root.clone();
            let cwd = ctx.cwd().to_owned();
            move || walk(&root, &cwd, overrides, &matcher, &shared)
        };
        let ended = search::run_walk(&shared, walk).await;
        let mut files = shared.take_results();
        files.sort_unstable();
        match ended {
            Ended::Cancelled => ToolOutput::error(crate::messages::ABORTED),
            Ended::TimedOut => {
                let so_far = files.join("\n");
                search::timed_out_output("Find", ctx.timeout(), &so_far)
            }
            Ended::Done if files.is_empty() => ToolOutput::text(NO_MATCHES),
            Ended::Done => {
                let content = files.join("\n");
                let kept = truncate_head(&content, Limits::default());
                let text = if shared.limit_reached() {
                    format!("{}\n\n{}", kept.content, footer_limited(limit))
                } else if kept.truncated() {
                    let footer = footer_truncated(kept.output_lines, kept.total_lines);
                    format!("{}\n\n{footer}", kept.content)
                } else {
                    content.clone()
                };
                ToolOutput::text(text)
            }
        }
    }

    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        let path = text("path").map(|p| format!("in {p}"));
        let parts = [text("pattern").map(str::to_owned), path];
        Some(Preview::parts(parts.into_iter().flatten()).with_label(Preview::label_of(input)))
    }
}

/// A listed path as the Flemma plugin prints it: `fd`'s output with a `<cwd>/` or `./` prefix taken
/// off.
fn relative(shown: String, cwd: &Path) -> String {
    if let Some(rel) = shown.strip_prefix("./") {
        return rel.to_owned();
    }
    let prefix = format!("{}/", cwd.display());
    match shown.strip_prefix(&prefix) {
        Some(rel) => rel.to_owned(),
        None => shown,
    }
}

/// The blocking part: walks `root` in parallel, collecting the files `pattern` matches.
fn walk(
    root: &Root,
    cwd: &Path,
    overrides: ignore::overrides::Override,
    pattern: &Pattern,
    shared: &Arc<Shared<String>>,
) {
    search::walker(&root.path, overrides, ".fdignore").run(|| {
        let shared = Arc::clone(shared);
        Box::new(move |entry| {
            if shared.should_stop() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            shared.visit();
            if pattern.is_match(entry.path(), &root.path) {
                if !shared.take_slot() {
                    return WalkState::Quit;
                }
                shared.push(relative(root.show(entry.path()), cwd));
            }
            WalkState::Continue
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, path: &str) -> bool {
        let (prefix, matcher) = parse(pattern).unwrap();
        let root = Path::new("/r").join(prefix);
        matcher.is_match(&Path::new("/r").join(path), &root)
            && Path::new("/r").join(path).starts_with(&root)
    }

    #[test]
    fn patterns_split_like_the_fd_backend() {
        assert!(matches("*.lua", "a.lua"));
        assert!(matches("*.lua", "deep/er/a.lua"));
        assert!(matches("*.lua", "A.LUA"), "smart case");
        assert!(!matches("*.Lua", "a.lua"));
        assert!(
            matches("src/*.tsx", "src/deep/a.tsx"),
            "fd looks below the prefix"
        );
        assert!(!matches("src/*.tsx", "lib/a.tsx"));
        assert!(matches("src/**/*.tsx", "src/a.tsx"));
        assert!(matches("src/**/*.tsx", "src/x/y/a.tsx"));
        assert!(matches("./src/*.rs", "src/a.rs"));
        assert!(matches("*/tests/*.rs", "crate/tests/it/a.rs"));
        assert!(!matches("*/tests/*.rs", "crate/src/a.rs"));
        assert!(matches("src/", "src/any"));
        let (prefix, _) = parse("a/b/*/c/*.rs").unwrap();
        assert_eq!(prefix, Path::new("a/b"));
        assert!(parse("[").is_err());
    }

    #[test]
    fn footers() {
        assert_eq!(
            footer_limited(1),
            "[Results limited to 1 entry. Narrow your pattern for more specific results.]"
        );
        assert_eq!(
            footer_limited(500),
            "[Results limited to 500 entries. Narrow your pattern for more specific results.]"
        );
        assert_eq!(
            footer_truncated(3, 9),
            "[Showing 3 of 9 results (truncated). Narrow your pattern for more specific results.]"
        );
    }

    #[test]
    fn listed_paths_lose_the_cwd_or_dot_prefix() {
        let cwd = Path::new("/w");
        assert_eq!(relative("./a/b".into(), cwd), "a/b");
        assert_eq!(relative("/w/a".into(), cwd), "a");
        assert_eq!(relative("/x/a".into(), cwd), "/x/a");
        assert_eq!(relative("src/a".into(), cwd), "src/a");
    }
}
