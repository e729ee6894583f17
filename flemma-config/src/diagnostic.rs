//! What [`Config::diagnostics`](crate::Config::diagnostics) finds wrong with the names the
//! options give ([`FinalizeIssue`]), and where the option was written
//! ([`Origin`]).

use std::fmt;
use std::path::PathBuf;

use crate::layer::Layer;

/// How serious a [`FinalizeIssue`] is (see [`FinalizeIssue::severity`]): the one severity of
/// every flemma diagnostic, owned by `flemma-ids` (the crate all flemma crates share) and the
/// same type as `flemma_ids::Severity`.
use flemma_ids::Severity;

/// Where an option was written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The conversation's frontmatter ([`Config::apply_frontmatter`](crate::Config::apply_frontmatter)), at a 1-based line of
    /// the transcript: for Lua the line of the statement that wrote the option; for JSON the
    /// line of the option's key when it is found, else the line of the `"flemma"` key (or the
    /// frontmatter's first line).
    Frontmatter {
        /// The transcript line.
        line: u32,
    },
    /// An options file ([`Config::load_toml_file`](crate::Config::load_toml_file)), at the 1-based line of the option's key.
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
    /// What is wrong (its `Display` is the Flemma plugin's text).
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

/// A warning or error found when the options are finalized against the registered tools.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinalizeIssue {
    /// A glob in `tools` that matches no registered tool.
    GlobMatchedNothing {
        /// The pattern.
        pattern: String,
    },
    /// A name in `tools` that is not a registered tool.
    UnknownTool {
        /// The name.
        name: String,
        /// The closest registered name.
        suggestion: Option<String>,
    },
    /// A name or glob in `tools.auto_approve` that matches no registered tool: it approves
    /// nothing (a warning; a misspelled `"wirte"` would leave `write` asking).
    AutoApproveMatchesNothing {
        /// The name or glob, as written.
        name: String,
        /// The closest registered name.
        suggestion: Option<String>,
    },
    /// A JSON frontmatter without a `"flemma"` key whose key names an option (`"tools"`): it
    /// is a template variable, not an option (a warning).
    OptionOutsideFlemmaKey {
        /// The key.
        key: String,
    },
    /// A `$preset` reference to a preset that does not exist.
    UnknownPreset {
        /// The option whose list held the reference.
        path: String,
        /// The reference.
        name: String,
        /// The closest preset name.
        suggestion: Option<String>,
    },
    /// A preset naming a tool that is not registered (a warning).
    PresetUnknownTool {
        /// The preset (with its `$`).
        preset: String,
        /// The tool name, operators stripped.
        tool: String,
        /// The preset field (`auto_approve` or `tools`).
        field: &'static str,
    },
    /// Options set for a tool that is not registered (`tools.<name>.<key>`).
    UnknownToolOptions {
        /// The tool name of the table.
        tool: String,
        /// The closest registered name.
        suggestion: Option<String>,
    },
    /// A layer narrows an MCP server (`mcp.servers.<name>.*`) that the options files do not
    /// configure: a misspelled name would leave the server it meant unnarrowed.
    UnknownMcpServer {
        /// The name.
        name: String,
        /// The closest configured server.
        suggestion: Option<String>,
    },
    /// A layer sets `enabled = true` for an MCP server the options files disable: it stays
    /// disabled (a warning).
    McpServerStaysDisabled {
        /// The server.
        name: String,
    },
    /// A frontmatter widens the sandbox, the tools' environment or the files references read
    /// (see [`Config::frontmatter_may_widen`](crate::Config::frontmatter_may_widen)): the
    /// option keeps the host's value, and the conversation stops until the line goes.
    FrontmatterWidens {
        /// The option.
        path: String,
        /// The host's value, as JSON.
        host: String,
    },
}

impl FinalizeIssue {
    /// Whether the issue stops a conversation: a name or glob in `tools` that matches no tool, an
    /// unknown preset in `tools` and a narrowed MCP server that is not configured are errors (the
    /// tool set would silently differ from the one asked for); an unknown preset in another list
    /// (`tools.auto_approve`: it approves nothing), a preset naming an unknown tool, a name in
    /// `tools.auto_approve` that matches no tool and options for an unknown tool are warnings.
    ///
    /// ```
    /// use flemma_config::FinalizeIssue;
    /// use flemma_ids::Severity;
    ///
    /// let typo = FinalizeIssue::UnknownTool { name: "reed".into(), suggestion: Some("read".into()) };
    /// assert_eq!(typo.severity(), Severity::Error);
    /// assert_eq!(typo.to_string(), "Unknown tool 'reed' -- did you mean 'read'?");
    /// let preset = FinalizeIssue::UnknownPreset {
    ///     path: "tools.auto_approve".into(),
    ///     name: "$redonly".into(),
    ///     suggestion: Some("$readonly".into()),
    /// };
    /// assert_eq!(preset.severity(), Severity::Warning);
    /// ```
    pub fn severity(&self) -> Severity {
        match self {
            FinalizeIssue::GlobMatchedNothing { .. }
            | FinalizeIssue::UnknownTool { .. }
            | FinalizeIssue::UnknownMcpServer { .. }
            | FinalizeIssue::FrontmatterWidens { .. } => Severity::Error,
            FinalizeIssue::UnknownPreset { path, .. } if path == "tools" => Severity::Error,
            FinalizeIssue::UnknownPreset { .. }
            | FinalizeIssue::PresetUnknownTool { .. }
            | FinalizeIssue::UnknownToolOptions { .. }
            | FinalizeIssue::AutoApproveMatchesNothing { .. }
            | FinalizeIssue::OptionOutsideFlemmaKey { .. }
            | FinalizeIssue::McpServerStaysDisabled { .. } => Severity::Warning,
        }
    }
}

impl std::fmt::Display for FinalizeIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hint = |s: &Option<String>| {
            s.as_ref()
                .map(|s| format!(" -- did you mean '{s}'?"))
                .unwrap_or_default()
        };
        match self {
            FinalizeIssue::GlobMatchedNothing { pattern } => {
                write!(f, "Glob pattern '{pattern}' matched no tools")
            }
            FinalizeIssue::UnknownTool { name, suggestion } => {
                write!(f, "Unknown tool '{name}'{}", hint(suggestion))
            }
            FinalizeIssue::AutoApproveMatchesNothing { name, suggestion } => {
                write!(
                    f,
                    "'{name}' in tools.auto_approve matches no tool: it approves nothing{}",
                    hint(suggestion)
                )
            }
            FinalizeIssue::OptionOutsideFlemmaKey { key } => {
                write!(
                    f,
                    "\"{key}\" is a template variable here, not an option: a JSON frontmatter's options go under its \"flemma\" key ({{\"flemma\": {{\"{key}\": …}}}})"
                )
            }
            FinalizeIssue::UnknownPreset {
                path,
                name,
                suggestion,
            } => {
                write!(f, "Unknown preset '{name}' in {path}{}", hint(suggestion))
            }
            FinalizeIssue::PresetUnknownTool {
                preset,
                tool,
                field,
            } => {
                write!(
                    f,
                    "Preset '{preset}' references unknown tool '{tool}' in {field}"
                )
            }
            FinalizeIssue::UnknownToolOptions { tool, suggestion } => {
                write!(
                    f,
                    "Options for unknown tool '{tool}' in tools.{tool}{}",
                    hint(suggestion)
                )
            }
            FinalizeIssue::UnknownMcpServer { name, suggestion } => {
                write!(
                    f,
                    "Unknown MCP server '{name}' in mcp.servers.{name} (only the servers of the options files can be narrowed){}",
                    hint(suggestion)
                )
            }
            FinalizeIssue::McpServerStaysDisabled { name } => {
                write!(
                    f,
                    "MCP server '{name}' is disabled in the options files; `enabled = true` cannot start it"
                )
            }
            FinalizeIssue::FrontmatterWidens { path, host } => {
                write!(
                    f,
                    "A conversation's frontmatter can only narrow {path} (the host's value is {host}); set it in flemma.toml or with --set, or let frontmatters widen it with `[frontmatter] may_widen = true` in flemma.toml"
                )
            }
        }
    }
}
