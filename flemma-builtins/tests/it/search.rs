//! Spec §12.5 `grep` and §12.6 `find`, in process: output format, sorting, footers, limits,
//! ignore rules and excludes, errors, cancellation and timeouts, on real files.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_builtins::{Find, Grep};
use flemma_config::{Config, Layer};
use flemma_core::preview::render_preview;
use flemma_core::{ExecutionContext, Tool, ToolOutput};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::scratch::Scratch;

/// A directory under the system temp dir, removed when dropped.
struct Tree(Scratch);

impl Tree {
    fn new(name: &str) -> Self {
        Self(Scratch::new(format!(
            "flemma-runtime-search-{}-{name}",
            std::process::id()
        )))
    }

    fn file(&self, path: &str, content: impl AsRef<[u8]>) -> &Self {
        let path = self.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        self
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Nested directories, a Git repository's `.gitignore`, a binary file, a long line of
/// multi-byte text, a hidden directory, CRLF, and the default excludes.
fn sample(name: &str) -> Tree {
    let tree = Tree::new(name);
    std::fs::create_dir_all(tree.path().join(".git")).unwrap();
    tree.file(".gitignore", "ignored.txt\nlogs/\n")
        .file("ignored.txt", "needle ignored\n")
        .file("logs/app.log", "needle in a log\n")
        .file(
            "src/main.rs",
            "fn main() {\n    // needle one\n}\n// needle two\n",
        )
        .file("src/lib.rs", "pub fn needle() {}\n")
        .file("src/nested/deep/mod.rs", "needle deep\n")
        .file("docs/readme.md", "Ünïcødé needle ✓\n")
        .file("long.txt", format!("needle{}\n", "é".repeat(600)))
        .file("bin.dat", b"needle\x00\x01\x02binary\n")
        .file("crlf.txt", "needle crlf\r\nother\r\n")
        .file("target/out.rs", "needle in target\n")
        .file("node_modules/pkg/index.js", "needle in a package\n")
        .file(".hidden/secret.rs", "needle hidden\n");
    tree
}

/// `count` small files in 20 directories, every one holding the word `needle`.
fn big(name: &str, count: usize) -> Tree {
    let tree = Tree::new(name);
    for i in 0..count {
        tree.file(
            &format!("d{:02}/f{i:05}.txt", i % 20),
            "a needle in a haystack\n",
        );
    }
    tree
}

fn ctx(tool: &str, cwd: &Path) -> ExecutionContext {
    ExecutionContext::builder("toolu_01".parse().unwrap(), tool.parse().unwrap())
        .cwd(cwd)
        .build()
        .unwrap()
}

fn ctx_with(tool: &str, cwd: &Path, path: &str, value: Value) -> ExecutionContext {
    let mut config = Config::new();
    config.set(Layer::Runtime, path, value).unwrap();
    ExecutionContext::builder("toolu_01".parse().unwrap(), tool.parse().unwrap())
        .cwd(cwd)
        .options(Arc::new(config.options().unwrap()))
        .build()
        .unwrap()
}

async fn grep(input: Value, ctx: &ExecutionContext) -> ToolOutput {
    Grep::new().unwrap().execute(input, ctx).await
}

async fn find(input: Value, ctx: &ExecutionContext) -> ToolOutput {
    Find::new().unwrap().execute(input, ctx).await
}

fn grep_input(pattern: &str) -> Value {
    json!({"label": "searching", "pattern": pattern, "path": null, "glob": null, "limit": null})
}

fn find_input(pattern: &str) -> Value {
    json!({"label": "finding", "pattern": pattern, "path": null, "limit": null})
}

fn with(mut input: Value, key: &str, value: impl Into<Value>) -> Value {
    input[key] = value.into();
    input
}

fn text(output: &ToolOutput) -> String {
    assert!(output.is_success(), "{output:?}");
    output.result_text()
}

fn error(output: &ToolOutput) -> String {
    match output {
        ToolOutput::Failure { error, .. } => error.clone(),
        ToolOutput::Success(_) => panic!("expected a failure, got {output:?}"),
    }
}

#[tokio::test]
async fn grep_prints_rg_lines_sorted_by_path_then_line() {
    let tree = sample("grep-all");
    let out = grep(grep_input("needle"), &ctx("grep", tree.path())).await;
    let long = format!("needle{}... [truncated]", "é".repeat(239));
    let expected = [
        "./crlf.txt:1:needle crlf",
        "./docs/readme.md:1:Ünïcødé needle ✓",
        &format!("./long.txt:1:{long}"),
        "./src/lib.rs:1:pub fn needle() {}",
        "./src/main.rs:2:    // needle one",
        "./src/main.rs:4:// needle two",
        "./src/nested/deep/mod.rs:1:needle deep",
    ]
    .join("\n");
    assert_eq!(text(&out), format!("{expected}\n\n[7 matches]"));
    // The long line was cut to MAX_LINE_CHARS bytes on a character boundary.
    assert_eq!(long.len(), 499);
}

#[tokio::test]
async fn grep_path_glob_and_singular_footer() {
    let tree = sample("grep-path");
    let ctx = ctx("grep", tree.path());
    let out = grep(with(grep_input("needle"), "path", "src/nested"), &ctx).await;
    assert_eq!(
        text(&out),
        "src/nested/deep/mod.rs:1:needle deep\n\n[1 match]"
    );
    // An absolute path inside the working directory is shown as `./…`.
    let abs = tree.path().join("src/nested").display().to_string();
    let out = grep(with(grep_input("deep"), "path", abs), &ctx).await;
    assert_eq!(
        text(&out),
        "./src/nested/deep/mod.rs:1:needle deep\n\n[1 match]"
    );
    // A file as the path.
    let out = grep(with(grep_input("fn"), "path", "src/lib.rs"), &ctx).await;
    assert_eq!(text(&out), "src/lib.rs:1:pub fn needle() {}\n\n[1 match]");

    let out = grep(with(grep_input("needle"), "glob", "*.rs"), &ctx).await;
    assert_eq!(
        text(&out),
        "./src/lib.rs:1:pub fn needle() {}\n./src/main.rs:2:    // needle one\n\
         ./src/main.rs:4:// needle two\n./src/nested/deep/mod.rs:1:needle deep\n\n[4 matches]"
    );
    // Like rg's `--glob`, the glob overrides the ignore rules: `ignored.txt` is searched.
    let out = text(&grep(with(grep_input("needle"), "glob", "*.{md,txt}"), &ctx).await);
    let paths: Vec<&str> = out.lines().filter_map(|l| l.split(':').next()).collect();
    assert_eq!(
        paths,
        [
            "./crlf.txt",
            "./docs/readme.md",
            "./ignored.txt",
            "./long.txt",
            "",
            "[4 matches]"
        ]
    );
}

#[tokio::test]
async fn grep_limit_reached_footers() {
    let tree = sample("grep-limit");
    let ctx = ctx("grep", tree.path());
    let all = text(&grep(grep_input("needle"), &ctx).await);
    let all: Vec<&str> = all.lines().take(7).collect();
    for (limit, footer) in [
        (json!(1), "[1 match, limit reached]"),
        (json!(3), "[3 matches, limit reached]"),
        (json!(2.5), "[3 matches, limit reached]"),
        (json!(0), "[1 match, limit reached]"),
    ] {
        let out = text(&grep(with(grep_input("needle"), "limit", limit), &ctx).await);
        let (body, foot) = out.rsplit_once("\n\n").unwrap();
        assert_eq!(foot, footer);
        let lines: Vec<&str> = body.lines().collect();
        assert!(lines.iter().all(|l| all.contains(l)), "{lines:?}");
        let mut sorted = lines.clone();
        sorted.sort_unstable();
        assert_eq!(lines, sorted);
    }
    // Exactly `limit` matches also reads as the limit reached, as the spec's process-stop did.
    let out = grep(with(grep_input("needle"), "limit", 7), &ctx).await;
    assert!(text(&out).ends_with("\n\n[7 matches, limit reached]"));
}

#[tokio::test]
async fn grep_errors_and_no_matches() {
    let tree = sample("grep-errors");
    let ctx = ctx("grep", tree.path());
    let out = grep(grep_input("absent-word"), &ctx).await;
    assert_eq!(out, ToolOutput::text("No matches found."));
    assert_eq!(
        grep(grep_input(""), &ctx).await,
        ToolOutput::error("No pattern provided")
    );
    let out = grep(grep_input("foo("), &ctx).await;
    let message = error(&out);
    assert!(
        message.starts_with("Invalid regex pattern 'foo(': ") && message.contains("unclosed group"),
        "{message}"
    );
    let out = grep(with(grep_input("x"), "glob", "a[b"), &ctx).await;
    assert!(error(&out).starts_with("Invalid glob pattern 'a[b': "));
    let out = grep(with(grep_input("x"), "path", "no/such/dir"), &ctx).await;
    assert_eq!(out, ToolOutput::error("Search failed with exit code 2"));
}

#[tokio::test]
async fn grep_excludes_come_from_the_options() {
    let tree = sample("grep-exclude");
    let none = ctx_with("grep", tree.path(), "tools.grep.exclude", json!([]));
    let out = text(&grep(grep_input("needle in"), &none).await);
    assert_eq!(
        out,
        "./node_modules/pkg/index.js:1:needle in a package\n\
         ./target/out.rs:1:needle in target\n\n[2 matches]"
    );
    // A list of one's own replaces the defaults.
    let docs = ctx_with(
        "grep",
        tree.path(),
        "tools.grep.exclude",
        json!(["docs", "*.txt"]),
    );
    let out = text(&grep(grep_input("needle"), &docs).await);
    assert!(!out.contains("docs/") && !out.contains(".txt"), "{out}");
    assert!(out.contains("./target/out.rs:1:"), "{out}");
    assert!(out.ends_with("[6 matches]"), "{out}");
}

#[tokio::test]
async fn grep_cancelled_before_and_while_running() {
    let tree = big("grep-cancel", 3000);
    let token = CancellationToken::new();
    token.cancel();
    let ctx = ExecutionContext::builder("toolu_01".parse().unwrap(), "grep".parse().unwrap())
        .cwd(tree.path())
        .cancellation(token)
        .build()
        .unwrap();
    let out = grep(grep_input("needle"), &ctx).await;
    assert_eq!(out, ToolOutput::error("User aborted tool execution."));

    let token = CancellationToken::new();
    let ctx = ExecutionContext::builder("toolu_02".parse().unwrap(), "grep".parse().unwrap())
        .cwd(tree.path())
        .cancellation(token.clone())
        .build()
        .unwrap();
    let started = Instant::now();
    let (out, ()) = tokio::join!(
        grep(with(grep_input("needle"), "limit", 1_000_000), &ctx),
        async {
            tokio::time::sleep(Duration::from_millis(2)).await;
            token.cancel();
        }
    );
    assert_eq!(out, ToolOutput::error("User aborted tool execution."));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn grep_times_out_with_partial_output_first() {
    let tree = big("grep-timeout", 3000);
    for timeout in [Duration::ZERO, Duration::from_millis(1)] {
        let ctx = ExecutionContext::builder("toolu_01".parse().unwrap(), "grep".parse().unwrap())
            .cwd(tree.path())
            .timeout(timeout)
            .build()
            .unwrap();
        let out = grep(with(grep_input("needle"), "limit", 1_000_000), &ctx).await;
        let message = error(&out);
        let (partial, last) = message
            .rsplit_once("\n\n")
            .unwrap_or(("", message.as_str()));
        assert_eq!(last, "Search timed out after 0 seconds.");
        assert!(partial.lines().count() < 3000);
        assert!(
            partial
                .lines()
                .all(|l| l.starts_with("./d") && l.ends_with(":1:a needle in a haystack"))
        );
    }
}

#[tokio::test]
async fn find_lists_sorted_relative_paths() {
    let tree = sample("find-all");
    let ctx = ctx("find", tree.path());
    let rs = "src/lib.rs\nsrc/main.rs\nsrc/nested/deep/mod.rs";
    assert_eq!(text(&find(find_input("*.rs"), &ctx).await), rs);
    assert_eq!(text(&find(find_input("src/**/*.rs"), &ctx).await), rs);
    assert_eq!(text(&find(find_input("./src/*.rs"), &ctx).await), rs);
    assert_eq!(
        text(&find(find_input("nested/*.rs"), &ctx).await),
        "No files found matching pattern."
    );
    assert_eq!(
        text(&find(find_input("src/nested/*.rs"), &ctx).await),
        "src/nested/deep/mod.rs"
    );
    assert_eq!(
        text(&find(find_input("*/nested/*.rs"), &ctx).await),
        "src/nested/deep/mod.rs"
    );
    assert_eq!(
        text(&find(find_input("*/deep/*.rs"), &ctx).await),
        "No files found matching pattern."
    );
    // Smart case, like fd: lower-case patterns ignore case.
    assert_eq!(
        text(&find(find_input("README.*"), &ctx).await),
        "No files found matching pattern."
    );
    assert_eq!(
        text(&find(find_input("readme.MD"), &ctx).await),
        "No files found matching pattern."
    );
    assert_eq!(
        text(&find(find_input("*.md"), &ctx).await),
        "docs/readme.md"
    );
    // Every file but the ignored, hidden and excluded ones.
    assert_eq!(
        text(&find(find_input("*"), &ctx).await),
        "bin.dat\ncrlf.txt\ndocs/readme.md\nlong.txt\nsrc/lib.rs\nsrc/main.rs\nsrc/nested/deep/mod.rs"
    );
    // A search path, relative or absolute, still prints paths relative to the working
    // directory.
    let out = find(with(find_input("*.rs"), "path", "src/nested"), &ctx).await;
    assert_eq!(text(&out), "src/nested/deep/mod.rs");
    let abs = tree.path().join("src").display().to_string();
    let out = find(with(find_input("m*.rs"), "path", abs), &ctx).await;
    assert_eq!(text(&out), "src/main.rs\nsrc/nested/deep/mod.rs");
}

#[tokio::test]
async fn find_limit_and_truncation_footers() {
    let tree = sample("find-limit");
    let ctx = ctx("find", tree.path());
    let out = text(&find(with(find_input("*.rs"), "limit", 1), &ctx).await);
    let (body, footer) = out.split_once("\n\n").unwrap();
    assert!(["src/lib.rs", "src/main.rs", "src/nested/deep/mod.rs"].contains(&body));
    assert_eq!(
        footer,
        "[Results limited to 1 entry. Narrow your pattern for more specific results.]"
    );
    let out = text(&find(with(find_input("*.rs"), "limit", 2.9), &ctx).await);
    assert!(out.ends_with(
        "\n\n[Results limited to 2 entries. Narrow your pattern for more specific results.]"
    ));
    assert_eq!(out.lines().count(), 4);

    let big = big("find-truncated", 2100);
    let big_ctx = self::ctx("find", big.path());
    let out = text(&find(with(find_input("*.txt"), "limit", 5000), &big_ctx).await);
    let (body, footer) = out.rsplit_once("\n\n").unwrap();
    assert_eq!(body.lines().count(), 2000);
    assert_eq!(body.lines().next(), Some("d00/f00000.txt"));
    assert_eq!(
        footer,
        "[Showing 2000 of 2100 results (truncated). Narrow your pattern for more specific results.]"
    );
}

#[tokio::test]
async fn find_errors_excludes_and_cancellation() {
    let tree = sample("find-errors");
    let ctx = ctx("find", tree.path());
    assert_eq!(
        find(find_input(""), &ctx).await,
        ToolOutput::error("No pattern provided")
    );
    assert!(
        error(&find(find_input("a[b"), &ctx).await).starts_with("Invalid glob pattern 'a[b': ")
    );
    let out = find(with(find_input("*"), "path", "no/such/dir"), &ctx).await;
    assert_eq!(out, ToolOutput::text("No files found matching pattern."));

    let none = ctx_with("find", tree.path(), "tools.find.exclude", json!([]));
    assert_eq!(
        text(&find(find_input("*.rs"), &none).await),
        "src/lib.rs\nsrc/main.rs\nsrc/nested/deep/mod.rs\ntarget/out.rs"
    );
    let src = ctx_with("find", tree.path(), "tools.find.exclude", json!(["nested"]));
    assert_eq!(
        text(&find(find_input("*.rs"), &src).await),
        "src/lib.rs\nsrc/main.rs\ntarget/out.rs"
    );

    let token = CancellationToken::new();
    token.cancel();
    let cancelled = ExecutionContext::builder("toolu_01".parse().unwrap(), "find".parse().unwrap())
        .cwd(tree.path())
        .cancellation(token)
        .build()
        .unwrap();
    assert_eq!(
        find(find_input("*"), &cancelled).await,
        ToolOutput::error("User aborted tool execution.")
    );
}

#[tokio::test]
async fn find_times_out() {
    let tree = big("find-timeout", 3000);
    let ctx = ExecutionContext::builder("toolu_01".parse().unwrap(), "find".parse().unwrap())
        .cwd(tree.path())
        .timeout(Duration::from_millis(1))
        .build()
        .unwrap();
    let out = find(with(find_input("*.txt"), "limit", 1_000_000), &ctx).await;
    let message = error(&out);
    let (partial, last) = message
        .rsplit_once("\n\n")
        .unwrap_or(("", message.as_str()));
    assert_eq!(last, "Find timed out after 0 seconds.");
    assert!(
        partial
            .lines()
            .all(|l| l.starts_with('d') && l.contains("/f"))
    );
}

#[test]
fn previews_and_registration() {
    let grep = Grep::new().unwrap();
    let input = json!({"label": "finding TODOs", "pattern": "TODO", "path": null, "glob": "*.lua", "limit": null});
    let preview = grep.preview(&input, 80).unwrap();
    assert_eq!(
        render_preview("grep", &preview, 80),
        "grep: /TODO/  *.lua — finding TODOs"
    );
    let find = Find::new().unwrap();
    let input =
        json!({"label": "finding tests", "pattern": "*.test.lua", "path": "src/", "limit": null});
    let preview = find.preview(&input, 80).unwrap();
    assert_eq!(
        render_preview("find", &preview, 80),
        "find: *.test.lua  in src/ — finding tests"
    );

    let tools = flemma_builtins::tools().unwrap();
    let named = |name: &str| {
        tools
            .iter()
            .find(|t| t.definition().name().as_str() == name)
    };
    assert!(named("grep").is_some() && named("find").is_some());
    assert!(named("grep").unwrap().definition().is_async());
}
