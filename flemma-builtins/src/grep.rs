//! The built-in `grep`: a regex search of file contents, printed as the Flemma plugin's
//! `rg` backend prints it, run in process with ripgrep's crates.

use std::sync::Arc;

use flemma_schema::builtin::inputs::GrepInput;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::WalkState;
use serde_json::Value;

use super::search::{self, Ended, Root, Shared};
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;
use flemma_core::truncate::{Limits, MAX_LINE_CHARS, truncate_head, truncate_line};

/// Matches collected when the call gives no `limit`.
pub(crate) const DEFAULT_LIMIT: usize = 100;

/// `tool.grep.no_matches`
const NO_MATCHES: &str = "No matches found.";

/// `tool.grep.error.exit_code` with rg's exit code for a search that could not start (a
/// search path that does not exist).
const FAILED: &str = "Search failed with exit code 2";

/// `tool.grep.footer` / `tool.grep.footer_limit_reached`.
fn footer(count: usize, limit_reached: bool) -> String {
    let noun = if count == 1 { "match" } else { "matches" };
    if limit_reached {
        format!("[{count} {noun}, limit reached]")
    } else {
        format!("[{count} {noun}]")
    }
}

/// An invalid regex (not a spec string: `rg` would exit with code 2).
fn invalid_regex(pattern: &str, error: &grep_regex::Error) -> String {
    format!("Invalid regex pattern '{pattern}': {error}")
}

/// One matching line.
#[derive(Debug)]
struct Match {
    path: Arc<str>,
    line: u64,
    /// The line without its terminator, cut to [`MAX_LINE_CHARS`].
    text: String,
}

/// The built-in `grep`: searches file contents with a regex and prints `path:line:text`.
///
/// The walk respects `.gitignore` (inside a Git repository), `.ignore` and `.rgignore`, skips
/// hidden and binary files and `tools.grep.exclude`, like `rg` does; it runs in parallel and
/// stops at the `limit` (default 100), the call's timeout or its cancellation. Matches are
/// printed sorted by path, then line.
#[derive(Debug, Clone)]
pub struct Grep {
    definition: ToolDefinition,
}

impl Grep {
    /// The tool with its built-in definition (flemma-schema's table).
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`flemma_schema::SchemaError`] otherwise.
    pub fn new() -> Result<Self, flemma_schema::SchemaError> {
        ToolDefinition::from_builtin(&flemma_schema::builtin::grep())
            .map(|definition| Self { definition })
    }
}

#[async_trait::async_trait]
impl Tool for Grep {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let input = match GrepInput::from_call(&input) {
            Ok(input) => input,
            Err(missing) => return ToolOutput::error(crate::messages::missing(missing)),
        };
        let pattern = input.pattern.as_str();
        let matcher = match RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(pattern)
        {
            Ok(matcher) => matcher,
            Err(error) => return ToolOutput::error(invalid_regex(pattern, &error)),
        };
        let root = Root::new(input.path.as_deref(), ctx);
        if !root.path.exists() {
            return ToolOutput::error(FAILED);
        }
        let glob = input.glob.as_deref().filter(|g| !g.is_empty());
        let overrides = match search::overrides(&root.path, glob, &ctx.options().tools.grep.exclude)
        {
            Ok(overrides) => overrides,
            Err(error) => return ToolOutput::error(error),
        };
        let limit = search::limit(input.limit, DEFAULT_LIMIT, f64::ceil);
        let shared = Shared::for_call(limit, ctx);
        let walk = {
            let shared = Arc::clone(&shared);
            let root = root.clone();
            move || walk(&root, overrides, &matcher, &shared)
        };
        let ended = search::run_walk(&shared, walk).await;
        let mut found = shared.take_results();
        found.sort_unstable_by(|a, b| a.path.cmp(&b.path).then(a.line.cmp(&b.line)));
        match ended {
            Ended::Cancelled => ToolOutput::error(crate::messages::ABORTED),
            Ended::TimedOut => {
                let so_far = lines(&found);
                search::timed_out_output("Search", ctx.timeout(), &so_far)
            }
            Ended::Done if found.is_empty() => ToolOutput::text(NO_MATCHES),
            Ended::Done => {
                let content = lines(&found);
                let kept = truncate_head(&content, Limits::default());
                let footer = footer(found.len(), shared.limit_reached());
                ToolOutput::text(format!("{}\n\n{footer}", kept.content))
            }
        }
    }

    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        let pattern = format!("/{}/", text("pattern").unwrap_or_default());
        let parts = [Some(pattern.as_str()), text("path"), text("glob")];
        Some(Preview::parts(parts.into_iter().flatten()).with_label(Preview::label_of(input)))
    }
}

/// The matches as `path:line:text` lines.
fn lines(matches: &[Match]) -> String {
    let mut out = String::new();
    for (i, m) in matches.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&m.path);
        out.push(':');
        out.push_str(&m.line.to_string());
        out.push(':');
        out.push_str(&m.text);
    }
    out
}

/// The blocking part: walks `root` in parallel, searching each file as `rg` does.
fn walk(
    root: &Root,
    overrides: ignore::overrides::Override,
    matcher: &RegexMatcher,
    shared: &Arc<Shared<Match>>,
) {
    let builder = {
        let mut builder = SearcherBuilder::new();
        builder
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'));
        builder
    };
    search::walker(&root.path, overrides, ".rgignore").run(|| {
        let mut searcher = builder.build();
        let matcher = matcher.clone();
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
            let found = search_file(&mut searcher, &matcher, entry.path(), &shared);
            if !found.is_empty() {
                let path: Arc<str> = root.show(entry.path()).into();
                shared.extend(found.into_iter().map(|(line, text)| Match {
                    path: Arc::clone(&path),
                    line,
                    text,
                }));
            }
            if shared.halted() {
                WalkState::Quit
            } else {
                WalkState::Continue
            }
        })
    });
}

/// The matching lines of one file (line number, cut text), each holding a result slot.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &std::path::Path,
    shared: &Shared<Match>,
) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    // Unreadable files are skipped, as `rg --no-messages` does.
    let _ = searcher.search_path(
        matcher,
        path,
        Lossy(|line, text| {
            if shared.halted() || !shared.take_slot() {
                return Ok(false);
            }
            let text = text.strip_suffix('\n').unwrap_or(text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            found.push((line, truncate_line(text, MAX_LINE_CHARS).into_owned()));
            Ok(!shared.halted())
        }),
    );
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footers_pluralise() {
        assert_eq!(footer(1, false), "[1 match]");
        assert_eq!(footer(2, false), "[2 matches]");
        assert_eq!(footer(1, true), "[1 match, limit reached]");
        assert_eq!(footer(100, true), "[100 matches, limit reached]");
    }

    /// The limit ends the walk: with a limit of 1 over 400 matching files, only the files
    /// the walking threads had already started on are searched.
    #[test]
    fn the_limit_stops_the_walk() {
        let scratch = tempfile::Builder::new()
            .prefix("flemma-grep-unit-")
            .tempdir()
            .unwrap();
        let dir = scratch.path();
        for i in 0..400 {
            let sub = dir.join(format!("d{}", i % 20));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("f{i}.txt")), "needle\n").unwrap();
        }
        let root = Root::at(Some(dir.to_str().unwrap()), dir);
        let matcher = RegexMatcherBuilder::new().build("needle").unwrap();
        let overrides = search::overrides(&root.path, None, &[]).unwrap();
        let shared = Arc::new(Shared::new(
            1,
            tokio_util::sync::CancellationToken::new(),
            std::time::Duration::from_secs(60),
        ));
        walk(&root, overrides, &matcher, &shared);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(12));
        assert!(shared.limit_reached());
        assert_eq!(shared.take_results().len(), 1);
        assert!(
            shared.visited() <= threads,
            "searched {} files with {threads} threads",
            shared.visited()
        );
    }
}
