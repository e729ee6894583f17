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
/// let dir = std::env::temp_dir().join("flemma-doc-workspace");
/// std::fs::create_dir_all(&dir)?;
/// let chat = dir.join("notes.chat");
/// let workspace = CommandWorkspace::new(&config, &options, Some(&chat), None);
/// assert_eq!(workspace.cwd(), Some(dir.as_path()));
/// assert!(!workspace.may_write(Path::new("/etc/passwd")));
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
            .and_then(|bash| crate::executor::tool_cwd(options, &bash, chat))
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
