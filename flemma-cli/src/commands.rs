//! The commands that read one file and print what they find: `parse`, `check`, `fmt`,
//! `approval explain` and `store path`.

use std::io::Write;
use std::path::Path;

use flemma::config::{FrontmatterError, OptionDiagnostic};

use crate::failure::{Failure, failed};
use crate::input::Input;
use crate::{options, render, tools, visible};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum SourceArg {
    Tool,
    Job,
}

/// `flemma parse`.
pub(crate) fn parse(out: &mut impl Write, file: &Path, json: bool) -> Result<u8, Failure> {
    let input = Input::read(file)?;
    let doc = flemma::ast::parse(&input.text);
    if json {
        render::json(out, &doc)?;
    } else {
        render::tree(out, &doc)?;
    }
    Ok(0)
}

/// `flemma store path`.
pub(crate) fn store_path(
    out: &mut impl Write,
    file: &Path,
    tool: &str,
    id: &str,
    source: SourceArg,
    json: bool,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    #[cfg(feature = "object-store")]
    let object = crate::object::place(file)?;
    #[cfg(feature = "object-store")]
    let chat = object.as_ref().map_or_else(
        || flemma::config::conversation_path(file),
        |place| place.local.clone(),
    );
    #[cfg(not(feature = "object-store"))]
    if file.to_string_lossy().starts_with("s3://") {
        return Err(Failure::usage(
            crate::input::InputError::ObjectUrl {
                name: file.display().to_string(),
            }
            .into(),
        ));
    }
    #[cfg(not(feature = "object-store"))]
    let chat = flemma::config::conversation_path(file);
    let mut config = settings.load()?;
    // The conversation's own frontmatter may override `tools.store`.
    #[cfg(feature = "object-store")]
    if let Some(text) = object.as_ref().and_then(|place| place.text.as_deref()) {
        options::apply_frontmatter(&mut config, &flemma::ast::parse(text))
            .map_err(|e| options::frontmatter_failure(&file.display().to_string(), &e))?;
    }
    #[cfg(feature = "object-store")]
    let is_file = object.is_none() && chat.is_file();
    #[cfg(not(feature = "object-store"))]
    let is_file = chat.is_file();
    if is_file {
        let input = Input::read(file)?;
        options::apply_frontmatter(&mut config, &flemma::ast::parse(&input.text))
            .map_err(|e| options::frontmatter_failure(&input.name, &e))?;
    }
    let store_options = config.options().map_err(|e| failed(e.into()))?.tools.store;
    let conversation = options::conversation_id(Some(&chat));
    let store = flemma::store::Store::new(&store_options, Some(&chat), &conversation)
        .map_err(|e| failed(e.into()))?;
    let usage = |e: flemma::ids::InvalidId| Failure::usage(e.into());
    let tool = flemma::ids::ToolName::read(tool).map_err(usage)?;
    let path = match source {
        SourceArg::Tool => {
            let id = flemma::ids::ToolUseId::new(id).map_err(usage)?;
            store.path_for(&id, Some(&tool))
        }
        SourceArg::Job => {
            let id = flemma::ids::JobId::new(id).map_err(usage)?;
            store.path_for(&id, Some(&tool))
        }
    }
    .map_err(|e| failed(e.into()))?;
    // An object conversation's result is printed as its object URL, where it is kept.
    #[cfg(feature = "object-store")]
    if let Some(url) = object.as_ref().and_then(|place| place.url_of(&path)) {
        if json {
            render::json(out, &serde_json::json!({ "path": url }))?;
        } else {
            writeln!(out, "{url}")?;
        }
        return Ok(0);
    }
    if json {
        render::json(out, &serde_json::json!({ "path": path }))?;
    } else {
        writeln!(out, "{}", path.display())?;
    }
    Ok(0)
}

/// `flemma check`: parser diagnostics, frontmatter errors and what is wrong with the tool
/// names, globs and presets the options give (one line each, `PLACE: severity: kind:
/// message`); exit 1 when there are any.
pub(crate) fn check(
    out: &mut impl Write,
    file: &Path,
    json: bool,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    let mut input = Input::read(file)?;
    let mut doc = flemma::ast::parse(&input.text);
    // The document holds all the checks read: the text goes now, which leaves room for what
    // they build.
    drop(std::mem::take(&mut input.text));
    // Markers such as `@User:` (their messages are never sent), duplicate tool use ids.
    let lints = flemma::ast::lint(&doc);
    doc.diagnostics.extend(lints);
    let mut config = settings.load()?;
    let frontmatter = options::apply_frontmatter(&mut config, &doc).err();
    // The names the options give, checked against the built-in tools (spec §5.4-§5.6).
    // The MCP servers' tools are names the options may give too.
    let registry = crate::setup::ready_registry(&config)?;
    crate::setup::subagents(&registry, Some(file))?;
    let found = registry
        .evaluate(&mut config)
        .map(|evaluation| evaluation.diagnostics)
        .map_err(|e| failed(anyhow::Error::new(e).context(input.name.clone())))?;
    // Calls that run in another process, or whose host died mid-run.
    if input.path().is_some() {
        let in_progress = tools::in_progress_diagnostics(file, &doc, settings);
        doc.diagnostics.extend(in_progress);
    }
    doc.diagnostics.sort_by_key(|d| d.line);
    let findings = Findings {
        name: &input.name,
        frontmatter: frontmatter.as_ref(),
        options: &found,
        parsed: &doc.diagnostics,
    };
    if json {
        findings.json(out)?;
    } else {
        findings.text(out)?;
    }
    let code = u8::from(!doc.diagnostics.is_empty() || frontmatter.is_some() || !found.is_empty());
    leave_to_exit(doc);
    Ok(code)
}

/// Leaves `doc` to the end of the process, which follows the command: its memory goes back to
/// the system at once then, where dropping it would free its allocations one by one (millions
/// in a 100 MB transcript: about a tenth of the CPU time `flemma check` took on one).
fn leave_to_exit(doc: flemma::ast::Document) {
    std::mem::forget(doc);
}

/// What `flemma check` found in a file, in the order it prints them.
struct Findings<'a> {
    /// The file's name as shown.
    name: &'a str,
    /// The frontmatter's error, if it failed.
    frontmatter: Option<&'a FrontmatterError>,
    /// What is wrong with the tool names, globs and presets the options give.
    options: &'a [OptionDiagnostic],
    /// The parser's diagnostics and the calls in progress.
    parsed: &'a [flemma::ast::Diagnostic],
}

impl Findings<'_> {
    /// `{"file", "diagnostics"}`: the frontmatter's error, the options' then the parser's.
    fn json(&self, out: &mut impl Write) -> Result<(), Failure> {
        let mut diagnostics = serde_json::to_value(self.parsed).map_err(|e| failed(e.into()))?;
        if let Some(list) = diagnostics.as_array_mut() {
            for (at, d) in self.options.iter().enumerate() {
                let mut value = serde_json::json!({
                    "kind": options::kind(d),
                    "severity": d.severity().as_str(),
                    "message": d.issue.to_string(),
                    "line": d.frontmatter_line(),
                });
                // A place outside the transcript: the options file and its line, `--set`.
                if d.frontmatter_line().is_none() {
                    value["place"] = options::place(self.name, d).into();
                }
                list.insert(at, value);
            }
            if let Some(err) = self.frontmatter {
                list.insert(
                    0,
                    serde_json::json!({"kind": "frontmatter", "severity": "error", "message": options::describe(err), "line": err.line}),
                );
            }
        }
        render::json(
            out,
            &serde_json::json!({ "file": self.name, "diagnostics": diagnostics }),
        )?;
        Ok(())
    }

    /// One line each: `PLACE: severity: kind: message`.
    fn text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let name = self.name;
        if let Some(err) = self.frontmatter {
            writeln!(
                out,
                "{}:{}: error: frontmatter: {}",
                visible::line(name),
                err.line,
                visible::text(&options::describe(err))
            )?;
        }
        for d in self.options {
            writeln!(
                out,
                "{}: {}: {}: {}",
                visible::line(&options::place(name, d)),
                d.severity(),
                options::kind(d),
                visible::text(&d.issue.to_string())
            )?;
        }
        for d in self.parsed {
            writeln!(
                out,
                "{}:{}: {}: {}: {}",
                visible::line(name),
                d.line,
                d.severity.as_str(),
                d.kind.as_str(),
                visible::text(&d.message)
            )?;
        }
        Ok(())
    }
}

/// `flemma approval explain`.
pub(crate) fn explain(
    out: &mut impl Write,
    file: &Path,
    tool: &str,
    input: &str,
    json: bool,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    let text = Input::read(file)?;
    let call_input: serde_json::Value = serde_json::from_str(input)
        .map_err(|e| Failure::usage(anyhow::Error::new(e).context("--input is not JSON")))?;
    let doc = flemma::ast::parse(&text.text);
    let mut config = settings.load()?;
    options::apply_frontmatter(&mut config, &doc)
        .map_err(|e| options::frontmatter_failure(&text.name, &e))?;
    let registry = crate::setup::registry(&config)?;
    let chat = text.path().map(flemma::config::conversation_path);
    let (explanation, judgement) =
        options::explain(&config, &registry, chat.as_deref(), tool, &call_input).map_err(failed)?;
    let writable = options::writable(&config, chat.as_deref()).map_err(failed)?;
    if json {
        let mut value = serde_json::to_value(&explanation).map_err(|e| failed(e.into()))?;
        if let Some(object) = value.as_object_mut() {
            if let Some(judgement) = &judgement {
                let judgement = serde_json::to_value(judgement).map_err(|e| failed(e.into()))?;
                object.insert("command".to_owned(), judgement);
            }
            let writable = serde_json::to_value(&writable).map_err(|e| failed(e.into()))?;
            object.insert("writable".to_owned(), writable);
        }
        render::json(out, &value)?;
    } else {
        render::explanation(out, tool, &explanation)?;
        if let Some(judgement) = &judgement {
            render::judgement(out, judgement)?;
        }
        render::writable(out, &writable)?;
    }
    Ok(0)
}

/// `flemma fmt`.
pub(crate) fn fmt(
    out: &mut impl Write,
    file: &Path,
    check: bool,
    json: bool,
) -> Result<u8, Failure> {
    let input = Input::read(file)?;
    let formatted = input.with_line_ending(&flemma::ast::print(&flemma::ast::parse(&input.text)));
    let changed = formatted != input.text;
    if json {
        render::json(
            out,
            &serde_json::json!({ "file": input.name, "changed": changed }),
        )?;
    }
    if check {
        if changed && !json {
            writeln!(out, "{}: not in canonical form", input.name)?;
        }
        return Ok(u8::from(changed));
    }
    if input.is_stdin() {
        if !json {
            out.write_all(formatted.as_bytes())?;
        }
    } else if changed {
        input
            .write_back(&formatted)
            .map_err(|e| Failure::usage(e.into()))?;
    }
    Ok(0)
}
