//! Spec §12.2-12.4, §12.7, §15: the file tools `read`, `write`, `edit` and `ls`, on real files
//! in a temporary directory, every model-facing string pinned.

mod edit;
mod ls;
mod read;
mod special;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use flemma_builtins::{EditTool, LsTool, ReadTool, WriteTool};
use flemma_core::preview::render_preview;
use flemma_core::sandbox::{PassThrough, Sandbox, SandboxPolicy};
use flemma_core::{ExecutionContext, Tool, ToolOutput};
use flemma_schema::Capability;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::scratch::Scratch;

/// A fresh directory under the system's temporary directory, removed on drop.
struct TempDir(Scratch);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Self(Scratch::new(format!(
            "flemma-runtime-files-{}-{n}",
            std::process::id()
        )))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn write(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.0.join(name)).unwrap()
    }
}

/// A context whose conversation is `<dir>/x.chat`, working in `cwd`.
fn context(dir: &Path, cwd: &Path, tool: &str) -> ExecutionContext {
    ExecutionContext::builder("toolu_01".parse().unwrap(), tool.parse().unwrap())
        .cwd(cwd)
        .filename(dir.join("x.chat"))
        .build()
        .unwrap()
}

async fn run(tool: &impl Tool, dir: &Path, input: Value) -> ToolOutput {
    let name = tool.definition().name().to_string();
    tool.execute(input, &context(dir, dir, &name)).await
}

/// The preview of a call as a pending placeholder shows it.
fn show(tool: &dyn Tool, input: &Value) -> String {
    let name = tool.definition().name().to_string();
    render_preview(&name, &tool.preview(input, 200).unwrap(), 200)
}

fn ok(text: impl Into<String>) -> ToolOutput {
    ToolOutput::text(text)
}

fn err(text: impl Into<String>) -> ToolOutput {
    ToolOutput::error(text)
}

/// A sandbox whose only writable directory is `<dir>/allowed`.
fn sandboxed(dir: &Path, tool: &str) -> ExecutionContext {
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let options = flemma_config::Config::new().options().unwrap();
    let policy = SandboxPolicy {
        conversation: None,
        rw_paths: vec![allowed],
        network: false,
        allow_privileged: false,
        read_only: vec![],
    };
    let sandbox = Sandbox::new(Arc::new(PassThrough), options.sandbox.clone(), policy);
    ExecutionContext::builder("toolu_01".parse().unwrap(), tool.parse().unwrap())
        .cwd(dir)
        .filename(dir.join("x.chat"))
        .sandbox(sandbox)
        .build()
        .unwrap()
}

/// The numbers `from..=to`, one per line, each line ended.
fn numbered_from(from: usize, to: usize) -> String {
    let lines: Vec<String> = (from..=to).map(|i| i.to_string()).collect();
    format!("{}\n", lines.join("\n"))
}

fn numbered(n: usize) -> String {
    numbered_from(1, n)
}

// ---------------------------------------------------------------------------------------------
// Registration

#[test]
fn the_file_tools_are_built_with_the_schema_crates_specs() {
    let tools = flemma_builtins::tools().unwrap();
    let named = |name: &str| {
        tools
            .iter()
            .find(|t| t.definition().name().as_str() == name)
            .unwrap_or_else(|| panic!("{name} is built in"))
    };
    for name in ["read", "write", "edit", "ls"] {
        let tool = named(name);
        let expected = flemma_schema::builtin::get(name)
            .unwrap()
            .spec(true)
            .unwrap();
        assert_eq!(tool.definition().spec(), &expected, "{name}");
        assert!(tool.definition().spec().strict, "{name}");
        assert!(!tool.definition().is_async(), "{name}");
        assert!(tool.definition().is_executable(), "{name}");
    }
    assert!(
        named("read")
            .definition()
            .has_capability(Capability::EmitsTemplate)
    );
    for name in ["write", "edit", "ls"] {
        assert!(
            !named(name)
                .definition()
                .has_capability(Capability::EmitsTemplate),
            "{name}"
        );
    }
}
