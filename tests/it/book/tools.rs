//! The built-in tools reference (`docs/reference/tools.md`), generated from their definitions.

use std::fmt::Write as _;

/// Text as Markdown: angle brackets outside code spans would be read as HTML tags.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// The built-in tools as the model sees them: name, description, capabilities and every
/// input parameter, from their definitions.
pub(super) fn render() -> Result<String, Box<dyn std::error::Error>> {
    let registry = flemma::runtime::ToolRegistry::new();
    flemma::runtime::register_builtins(&registry)?;
    let mut tools = registry.list();
    tools.sort_by(|a, b| a.definition().name().cmp(b.definition().name()));
    let mut page = String::from(
        "# Built-in tools\n\n\
         <!-- Generated from the built-in tools' definitions by \
         `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma --all-features --test it book`; \
         do not edit by hand. -->\n\n\
         The tools `register_builtins` registers, as a model is offered them: each one's \
         description and input schema, and the capabilities the approval chain and the sandbox \
         read. `flemma.background` and `flemma.save_to` are the harness's parameters, added to \
         the tools that support them (see [Tools](../tools.md)).\n",
    );
    let mut harness = std::collections::BTreeMap::new();
    for tool in tools {
        let definition = tool.definition();
        let spec = definition.spec();
        let _ = write!(page, "\n## `{}`\n\n", spec.name);
        let _ = writeln!(
            page,
            "{}\n",
            escape(spec.description.trim()).replace('\n', "\n\n")
        );
        let capabilities: Vec<String> = definition
            .capabilities()
            .iter()
            .map(|c| format!("`{c}`"))
            .collect();
        if !capabilities.is_empty() {
            let _ = writeln!(page, "Capabilities: {}.\n", capabilities.join(", "));
        }
        let required: Vec<&str> = spec.input_schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let Some(properties) = spec.input_schema["properties"].as_object() else {
            page.push_str("No input.\n");
            continue;
        };
        page.push_str("| parameter | type | required | description |\n| --- | --- | --- | --- |\n");
        for (name, schema) in properties {
            let kind = match &schema["type"] {
                serde_json::Value::String(t) => t.clone(),
                serde_json::Value::Array(ts) => ts
                    .iter()
                    .filter_map(|t| t.as_str())
                    .filter(|t| *t != "null")
                    .collect::<Vec<_>>()
                    .join(" or "),
                _ => "any".to_owned(),
            };
            let kind = match schema["enum"].as_array() {
                Some(values) => values
                    .iter()
                    .filter(|v| !v.is_null())
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                None => kind,
            };
            let description = escape(schema["description"].as_str().unwrap_or(""))
                .replace('|', "\\|")
                .replace('\n', " ");
            // Strict schemas list every parameter as required and make the optional ones
            // nullable.
            let nullable = schema["type"]
                .as_array()
                .is_some_and(|ts| ts.iter().any(|t| t == "null"));
            let needed = required.contains(&name.as_str()) && !nullable;
            let description = if name.starts_with("flemma.") {
                harness.insert(name.clone(), description);
                "the harness's (below)".to_owned()
            } else {
                description
            };
            let _ = writeln!(
                page,
                "| `{name}` | {kind} | {} | {description} |",
                if needed { "yes" } else { "no" }
            );
        }
    }
    page.push_str("\n## Harness parameters\n\nWhat the model is told of each:\n\n");
    for (name, description) in harness {
        let _ = writeln!(page, "- `{name}`: {description}");
    }
    Ok(page)
}
