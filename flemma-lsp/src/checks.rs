//! The diagnostics beyond the parser's: the frontmatter's (evaluated against the host's
//! options and tools: unknown options, tool names with "did you mean", globs matching nothing,
//! Lua errors with their lines), tool inputs that fail their tool's schema (as the executor
//! reads them: [`crate::input`]), and tool uses
//! without results when the user is about to send.

use std::collections::HashMap;

use flemma_ast::{Document, Role, Segment};
use flemma_config::Config;
use flemma_ids::Severity;
use flemma_runtime::ToolRegistry;

use crate::error::report;
use lsp_types::DiagnosticSeverity;

/// A diagnostic on a line of the parser's (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) line: u32,
    pub(crate) severity: DiagnosticSeverity,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

/// The protocol's severity of one of ours.
pub(crate) fn severity(severity: Severity) -> DiagnosticSeverity {
    match severity {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
    }
}

/// A frontmatter as evaluated: language, code, first line.
type FrontmatterKey = Option<(String, String, u32)>;

/// A conversation's options as evaluated: the host's layers with its frontmatter, against the
/// host's tools.
#[derive(Debug)]
pub(crate) struct Evaluated {
    pub(crate) config: Config,
    pub(crate) options: flemma_config::Options,
}

/// What one frontmatter evaluation left.
#[derive(Debug)]
struct Evaluation {
    key: FrontmatterKey,
    found: Vec<Found>,
    /// `None` when the options do not evaluate.
    evaluated: Option<std::sync::Arc<Evaluated>>,
}

/// What the checks need from the host, and what they keep between publishes.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    /// The options below the frontmatter.
    pub(crate) config: Config,
    /// The host's tools (names for the options, schemas for the inputs).
    pub(crate) registry: Option<ToolRegistry>,
    /// The last frontmatter evaluated, by document, and what it found.
    frontmatters: HashMap<String, Evaluation>,
    /// Each tool's input validator (`None`: its schema does not compile).
    validators: HashMap<String, Option<flemma_schema::Validator>>,
}

impl Checks {
    pub(crate) fn new(config: Config, registry: Option<ToolRegistry>) -> Self {
        Self {
            config,
            registry,
            ..Self::default()
        }
    }

    /// Forgets what was kept for a document that is closed.
    pub(crate) fn forget(&mut self, uri: &str) {
        self.frontmatters.remove(uri);
    }

    /// Everything found in `doc` (the document of `uri`) beyond the parser's diagnostics.
    pub(crate) fn run(
        &mut self,
        uri: &str,
        doc: &Document,
        index: &flemma_ast::ToolIndex,
    ) -> Vec<Found> {
        let mut found = self.frontmatter(uri, doc);
        self.unanswered(doc, index, &mut found);
        found
    }

    /// The frontmatter's diagnostics, evaluated again only when its text changed.
    fn frontmatter(&mut self, uri: &str, doc: &Document) -> Vec<Found> {
        self.evaluation(uri, doc).found.clone()
    }

    /// The options of the document `uri` (the host's with its frontmatter), `None` when they
    /// do not evaluate.
    pub(crate) fn evaluated(
        &mut self,
        uri: &str,
        doc: &Document,
    ) -> Option<std::sync::Arc<Evaluated>> {
        self.evaluation(uri, doc).evaluated.clone()
    }

    /// The evaluation of the document's frontmatter, made again only when its text changed.
    fn evaluation(&mut self, uri: &str, doc: &Document) -> &Evaluation {
        let key = doc
            .frontmatter
            .as_ref()
            .map(|fm| (fm.language.clone(), fm.code.clone(), fm.span.start_line + 1));
        let fresh = self
            .frontmatters
            .get(uri)
            .is_some_and(|kept| kept.key == key);
        if !fresh {
            let evaluation = self.evaluate(key);
            self.frontmatters.insert(uri.to_owned(), evaluation);
        }
        &self.frontmatters[uri]
    }

    fn evaluate(&self, key: FrontmatterKey) -> Evaluation {
        let mut config = self.config.clone();
        if let Some((language, code, line)) = &key
            && let Err(error) = config.apply_frontmatter(language, code, *line)
        {
            let mut message = error.message.clone();
            if let Some(cause) = std::error::Error::source(&error) {
                message.push_str(": ");
                message.push_str(&report(cause));
            }
            let found = vec![Found {
                line: error.line,
                severity: DiagnosticSeverity::ERROR,
                code: "frontmatter",
                message,
            }];
            return Evaluation {
                key,
                found,
                evaluated: None,
            };
        }
        let line = key.as_ref().map_or(1, |(_, _, line)| *line);
        let evaluated = match &self.registry {
            Some(registry) => registry
                .evaluate(&mut config)
                .map(|e| (e.options, e.diagnostics)),
            None => config.options().map(|o| (o, Vec::new())),
        };
        match evaluated {
            Ok((options, diagnostics)) => Evaluation {
                found: diagnostics
                    .iter()
                    .filter_map(|d| {
                        Some(Found {
                            line: d.frontmatter_line()?,
                            severity: severity(d.severity()),
                            code: "options",
                            message: d.issue.to_string(),
                        })
                    })
                    .collect(),
                evaluated: Some(std::sync::Arc::new(Evaluated { config, options })),
                key,
            },
            Err(error) => Evaluation {
                key,
                found: vec![Found {
                    line,
                    severity: DiagnosticSeverity::ERROR,
                    code: "options",
                    message: report(&error),
                }],
                evaluated: None,
            },
        }
    }

    /// Tool uses not answered yet: an input that fails its tool's schema, and, when the last
    /// message is the user's (a send comes next), the warning the send would give.
    fn unanswered(
        &mut self,
        doc: &Document,
        index: &flemma_ast::ToolIndex,
        found: &mut Vec<Found>,
    ) {
        let sending = doc.messages.last().is_some_and(|m| {
            m.role == Role::You
                && m.segments
                    .iter()
                    .any(|s| matches!(s, Segment::Text(t) if !t.value.trim().is_empty()))
        });
        for tool_use in doc.messages.iter().flat_map(flemma_ast::Message::tool_uses) {
            let id = tool_use.id.as_str();
            let answered = index.last_tool_result(doc, id).is_some_and(|r| {
                !r.node
                    .status
                    .is_some_and(flemma_ast::ToolStatus::is_lifecycle)
            });
            if answered {
                continue;
            }
            let name = tool_use.name.as_str();
            if let Some(validator) = self.validator(name)
                && let Err(error) = validator.validate(&crate::input::call_input(tool_use.input()))
            {
                found.push(Found {
                    line: tool_use.span.start_line,
                    severity: DiagnosticSeverity::ERROR,
                    code: "tool_input",
                    message: format!(
                        "The input does not match the `{name}` tool's schema: {error}"
                    ),
                });
            }
            if sending {
                found.push(Found {
                    line: tool_use.span.start_line,
                    severity: DiagnosticSeverity::WARNING,
                    code: "tool_use",
                    message: format!(
                        "Tool call '{name}' ({id}) has no matching tool result. A synthetic 'No result provided' error response will be sent to the API."
                    ),
                });
            }
        }
    }

    /// The validator of the registered tool `name`.
    fn validator(&mut self, name: &str) -> Option<&flemma_schema::Validator> {
        let registry = self.registry.as_ref()?;
        if !self.validators.contains_key(name) {
            let validator = registry.get(name).and_then(|tool| {
                let schema =
                    crate::input::call_schema(name, &tool.definition().spec().input_schema);
                flemma_schema::Validator::new(&schema).ok()
            });
            self.validators.insert(name.to_owned(), validator);
        }
        self.validators.get(name)?.as_ref()
    }
}
