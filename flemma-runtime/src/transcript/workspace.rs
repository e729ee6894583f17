//! Where a conversation's commands run, for the command rules of the approval chain.

use std::path::{Path, PathBuf};

use flemma_approval::Workspace;
use flemma_config::{Config, Options};
use flemma_core::sandbox::SandboxPolicy;
use flemma_ids::ToolName;

/// Where a conversation's `bash` commands run: the directory they start in
/// (`tools.bash.cwd`), the conversation's project, and its writable set (the sandbox policy's
/// writable paths less its read-only ones, whether or not the sandbox is on). The approval
/// chain's command rules ([`flemma_approval::BashRulesResolver`]) ask for a redirection that
/// writes outside it.
///
/// ```
/// use flemma_approval::Workspace as _;
/// use flemma_config::Config;
/// use flemma_runtime::transcript::CommandWorkspace;
/// use std::path::Path;
///
/// let config = Config::new();
/// let options = config.options()?;
/// let dir = std::env::temp_dir().join(format!("flemma-doc-workspace-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let chat = dir.join("notes.chat");
/// let workspace = CommandWorkspace::new(&config, &options, Some(&chat), None);
/// assert_eq!(workspace.cwd(), Some(dir.as_path()));
/// assert!(!workspace.may_write(Path::new("/etc/passwd")));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct CommandWorkspace {
    cwd: Option<PathBuf>,
    project: Option<PathBuf>,
    writable: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
}

impl CommandWorkspace {
    /// The workspace of the conversation in `chat` (absolute and resolved: see
    /// [`flemma_config::conversation_path`]; `None` for one without a file, whose commands
    /// start in the process's directory) with its store in `store_dir`.
    pub fn new(
        config: &Config,
        options: &Options,
        chat: Option<&Path>,
        store_dir: Option<&Path>,
    ) -> Self {
        let policy = SandboxPolicy::for_conversation(&options.sandbox, chat, store_dir)
            .protecting(&options.sandbox, config.protected_files());
        Self::with_policy(options, chat, &policy)
    }

    /// The same from a policy already resolved for the conversation.
    pub(crate) fn with_policy(
        options: &Options,
        chat: Option<&Path>,
        policy: &SandboxPolicy,
    ) -> Self {
        let bash = ToolName::new("bash").ok();
        let cwd = bash
            .and_then(|bash| tool_cwd(options, &bash, chat))
            .or_else(|| std::env::current_dir().ok());
        let project = chat
            .and_then(Path::parent)
            .map(flemma_config::project_root)
            .or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|d| flemma_config::project_root(&d))
            });
        CommandWorkspace {
            cwd,
            project,
            writable: policy.rw_paths.clone(),
            read_only: policy.read_only.clone(),
        }
    }
}

impl Workspace for CommandWorkspace {
    fn cwd(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    fn project(&self) -> Option<&Path> {
        self.project.as_deref()
    }

    fn may_write(&self, path: &Path) -> bool {
        self.writable.iter().any(|root| path.starts_with(root))
            && !self.read_only.iter().any(|file| path.starts_with(file))
    }
}

/// The working directory of a tool's calls: `tools.<name>.cwd` expanded, else
/// the conversation's directory; `None` leaves the context's default (the process's).
/// `chat` is the conversation's resolved file; a relative configured directory is taken
/// against its directory. Besides the Flemma plugin's `urn:flemma:buffer:path` and `urn:flemma:cwd`,
/// `urn:flemma:project` names the conversation's project ([`flemma_config::project_root`]).
pub(crate) fn tool_cwd(options: &Options, tool: &ToolName, chat: Option<&Path>) -> Option<PathBuf> {
    let configured = match tool.as_str() {
        "bash" => Some(options.tools.bash.cwd.clone()),
        "grep" => Some(options.tools.grep.cwd.clone()),
        "find" => Some(options.tools.find.cwd.clone()),
        "ls" => Some(options.tools.ls.cwd.clone()),
        _ => options
            .tool_options(tool)
            .and_then(|table| table.get("cwd"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    };
    let chat_dir = chat.and_then(Path::parent);
    match configured.as_deref() {
        None | Some("" | "urn:flemma:buffer:path") => chat_dir.map(Path::to_owned),
        Some("urn:flemma:project") => chat_dir.map(flemma_config::project_root),
        Some("urn:flemma:cwd") => std::env::current_dir().ok(),
        Some(text) => {
            let env = |name: &str| std::env::var(name).ok();
            let dir = flemma_core::sandbox::expand_path(text, &env)?;
            // Relative: from the conversation's directory (the context makes it absolute
            // against its default for a conversation without a file).
            Some(match chat_dir {
                Some(base) if dir.is_relative() => flemma_config::fold_path(&base.join(dir)),
                _ => dir,
            })
        }
    }
}
