//! What [`Config::diagnostics`] finds wrong with the names the options give.

use super::{Config, Entry};
use crate::diagnostic::{FinalizeIssue, OptionDiagnostic, Origin};
use crate::layer::Layer;
use crate::listops::{ListOp, expand_op, parse_list};
use crate::schema::tool_table;

impl Config {
    /// What is wrong with the names the options give, checked against the registered tools
    /// and the presets, each with where it was written.
    ///
    /// Call it once every tool source has loaded (the finalize pass): a glob
    /// that matches nothing yet is kept as written while sources load, and is expanded and
    /// checked here. Checked, in the order written:
    ///
    /// * every name and glob an operation on `tools` gives, in every layer — `set`, `append`,
    ///   `prepend` and `remove` alike, `$presets` expanded (`Unknown tool '<x>'`, with ` --
    ///   did you mean '<y>'?` when a registered name is close; `Glob pattern '<x>' matched no
    ///   tools`), so that a misspelled `:remove("wirte")` is an error, not a silent no-op;
    /// * `$preset` references that name no preset in `tools` and `tools.auto_approve`, and
    ///   names and globs in `tools.auto_approve` that match no tool (a warning: they approve
    ///   nothing);
    /// * the tools the presets name ([`Presets::finalize`](crate::Presets::finalize));
    /// * tables of options for tools that are not registered (`tools.<name>.<key>`);
    /// * MCP servers a layer narrows (`mcp.servers.<name>.*`) that the `[mcp]` section of the
    ///   options files does not configure, when there is one, and `enabled = true` for a
    ///   server that section disables;
    /// * a JSON frontmatter without a `"flemma"` key whose key names an option
    ///   ([`FinalizeIssue::OptionOutsideFlemmaKey`]);
    /// * a frontmatter that widens the sandbox, the tools' environment or the files references
    ///   read ([`FinalizeIssue::FrontmatterWidens`], unless
    ///   [`frontmatter_may_widen`](Config::frontmatter_may_widen)).
    ///
    /// Which of these stop a conversation is [`FinalizeIssue::severity`]; hosts usually go
    /// through `flemma_runtime::ToolRegistry::evaluate`, which stops on the errors.
    ///
    /// ```
    /// use flemma_config::{Config, Layer, Origin};
    /// use flemma_ids::Severity;
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
                        // `tools.auto_approve` names are matched at approval time (spec §5.4);
                        // those written as names are checked below.
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
        for (issue, origin) in self.auto_approve_issues(registered) {
            add(issue, Some(origin));
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
        for (issue, origin) in self.mcp_server_issues() {
            add(issue, Some(origin));
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
        // A frontmatter's option outside "flemma"; one that widens the sandbox, the
        // environment or file access.
        let stray = self.stray_option.as_ref().map(|(key, line)| {
            (
                FinalizeIssue::OptionOutsideFlemmaKey { key: key.clone() },
                Some(Origin::Frontmatter { line: *line }),
            )
        });
        for (issue, origin) in stray.into_iter().chain(self.widening_issues()) {
            add(issue, origin);
        }
        found
    }

    /// The MCP servers a layer narrows that the options files do not configure (when they
    /// configure any), and `enabled = true` for a server they disable.
    fn mcp_server_issues(&self) -> Vec<(FinalizeIssue, Origin)> {
        let mut found = Vec::new();
        for (name, origin, enables) in self.narrowed_servers() {
            // Only a host that configures servers in the options files can be checked.
            let Some(servers) = self
                .section("mcp")
                .and_then(|mcp| mcp.get("servers"))
                .and_then(serde_json::Value::as_object)
            else {
                continue;
            };
            match servers.get(&name) {
                None => {
                    let suggestion =
                        crate::suggest::did_you_mean(&name, servers.keys().map(String::as_str))
                            .map(str::to_owned);
                    found.push((FinalizeIssue::UnknownMcpServer { name, suggestion }, origin));
                }
                Some(server) if enables && server.get("enabled") == Some(&false.into()) => {
                    found.push((FinalizeIssue::McpServerStaysDisabled { name }, origin));
                }
                Some(_) => {}
            }
        }
        found
    }

    /// The names and globs written in `tools.auto_approve` (not those a preset or the
    /// defaults give: the presets are checked on their own) that match no tool: they approve
    /// nothing.
    fn auto_approve_issues(
        &self,
        registered: &[flemma_ids::ToolName],
    ) -> Vec<(FinalizeIssue, Origin)> {
        let mut found = Vec::new();
        for (values, origin) in self.written_values_as_written("tools.auto_approve") {
            for value in values {
                if crate::listops::is_preset_ref(&value) {
                    continue;
                }
                let glob = crate::glob::GlobList::new([value.as_str()]);
                if registered.iter().any(|r| glob.is_match(r.as_str())) {
                    continue;
                }
                let suggestion = if value.contains('*') {
                    None
                } else {
                    crate::suggest::did_you_mean(
                        &value,
                        registered.iter().map(flemma_ids::ToolName::as_str),
                    )
                    .map(str::to_owned)
                };
                found.push((
                    FinalizeIssue::AutoApproveMatchesNothing {
                        name: value,
                        suggestion,
                    },
                    origin.clone(),
                ));
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

    /// The values every write to a list path gives, `$presets` expanded (unknown ones left
    /// as written), with where each write was made; lowest layer first, in order.
    pub(crate) fn written_values(&self, path: &str) -> Vec<(Vec<String>, Origin)> {
        self.values_written(path, true)
    }

    /// The values every write above the defaults gives to a list path, as written (`$presets`
    /// not expanded), with where each write was made.
    fn written_values_as_written(&self, path: &str) -> Vec<(Vec<String>, Origin)> {
        self.values_written(path, false)
    }

    fn values_written(&self, path: &str, expand_presets: bool) -> Vec<(Vec<String>, Origin)> {
        let expand = |name: &str| {
            if expand_presets {
                self.presets.expand(name, path)
            } else {
                None
            }
        };
        let mut out = Vec::new();
        for layer in Layer::ALL
            .into_iter()
            .filter(|layer| expand_presets || *layer != Layer::Defaults)
        {
            for (entry, origin) in self.layers[layer.index()]
                .iter()
                .zip(&self.origins[layer.index()])
                .filter(|(e, _)| e.path() == path)
            {
                let ops = match entry {
                    Entry::ListWrite { items, .. } => parse_list(path, items, &expand)
                        .unwrap_or_default()
                        .iter()
                        .flat_map(|op| expand_op(op, &expand))
                        .collect(),
                    Entry::ListOp { op, .. } => expand_op(op, &expand),
                    // A function names no tools to check.
                    Entry::Scalar { .. } | Entry::Function { .. } => Vec::new(),
                };
                let values = ops
                    .into_iter()
                    .flat_map(|op| match op {
                        ListOp::Set(items) => items,
                        ListOp::Append(v) | ListOp::Prepend(v) | ListOp::Remove(v) => vec![v],
                    })
                    .collect();
                out.push((values, origin.clone()));
            }
        }
        out
    }

    /// The MCP servers the layers narrow (`mcp.servers.<name>.*`), in the order written, with
    /// where and whether the write is `enabled = true`.
    fn narrowed_servers(&self) -> Vec<(String, Origin, bool)> {
        let mut servers = Vec::new();
        for (entry, origin) in self
            .layers
            .iter()
            .flatten()
            .zip(self.origins.iter().flatten())
        {
            if let Ok(segments) = crate::path::split(entry.path())
                && let Some(name) = crate::schema::mcp_server(&segments)
            {
                let enables = matches!(
                    entry,
                    Entry::Scalar { path, value } if path.ends_with(".enabled") && *value == true
                );
                servers.push((name.to_owned(), origin.clone(), enables));
            }
        }
        servers
    }

    /// The tools whose tables of options are set (`tools.<name>.<key>`), each once, with
    /// where it was first set.
    pub(crate) fn tool_tables(&self) -> Vec<(String, Origin)> {
        let mut tables: Vec<(String, Origin)> = Vec::new();
        for (entry, origin) in self
            .layers
            .iter()
            .flatten()
            .zip(self.origins.iter().flatten())
        {
            if let Entry::Scalar { path, .. } = entry
                && let Ok(segments) = crate::path::split(path)
                && let Some(tool) = tool_table(&segments)
                && !tables.iter().any(|(t, _)| t == tool)
            {
                tables.push((tool.to_owned(), origin.clone()));
            }
        }
        tables
    }
}
