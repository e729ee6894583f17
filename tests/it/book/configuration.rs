//! The configuration reference (`docs/reference/configuration.md`), generated from the options
//! schema (`known_options`) and the built-in presets.

use std::fmt::Write as _;

use flemma::config::{FrontmatterRule, HOST_SECTIONS, MCP_SERVER_FIELDS, Presets, known_options};

fn code_list(items: &[String]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn render() -> String {
    let mut page = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from flemma-config's options schema and presets by \
         `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma --all-features --test it book`; do not edit by \
         hand. -->\n\n\
         Options are written in four layers, each above the one before: the defaults; the \
         host's setup (`flemma.toml` in the working directory or `--config PATH`, or \
         `ConfigBuilder` in code); changes while running (`--set KEY=VALUE`); and the \
         conversation's frontmatter (JSON, or Lua: `flemma.opt.tools.auto_approve:append(\"bash\")`). \
         A higher layer wins, except for `sandbox.enabled`, where a change while running wins \
         over the frontmatter. A list is written whole or with list operations, each item \
         applied in turn to the layer below: `+x` adds, `^x` puts first, `!x` removes, `$name` \
         is a preset's list. In `flemma.toml` an option is a key of its table \
         (`[tools]` `max_concurrent = 4`; `tools` itself is `tools.list`).\n\n\
         A frontmatter may only narrow some options, each marked below with how; \
         [What a transcript's frontmatter can change](../security.md#what-a-transcripts-frontmatter-can-change) \
         says why, what happens to a wider value, and how a host lets it widen.\n",
    );

    page.push_str(
        "\n## Presets\n\n\
         A preset names a list for the list options (`tools.auto_approve = [\"$readonly\"]`). \
         The built-in ones:\n\n\
         | preset | `tools.auto_approve` | `tools` |\n| --- | --- | --- |\n",
    );
    let presets = Presets::default();
    let mut names: Vec<&str> = presets.names().collect();
    names.sort_unstable();
    for name in names {
        let Some(preset) = presets.get(name) else {
            continue;
        };
        let column = |list: &Option<Vec<String>>| list.as_deref().map_or("—".to_owned(), code_list);
        let _ = writeln!(
            page,
            "| `{name}` | {} | {} |",
            column(&preset.auto_approve),
            column(&preset.tools)
        );
    }

    page.push_str("\n## Options\n");
    for option in known_options() {
        let _ = write!(page, "\n### `{}`\n\n{}\n\n", option.path, option.doc);
        let default = if option.default.is_null() {
            "unset".to_owned()
        } else {
            format!("`{}`", option.default)
        };
        let _ = writeln!(page, "- Type: {}.", option.kind.describe());
        let _ = writeln!(page, "- Default: {default}.");
        let frontmatter = match option.frontmatter {
            FrontmatterRule::Any => "any value".to_owned(),
            FrontmatterRule::Narrow(how) => format!("narrows only: {how}"),
            FrontmatterRule::NarrowOrder(order) => format!(
                "narrows only: a value at or before the host's in {}",
                order
                    .iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(" < ")
            ),
            FrontmatterRule::HostOnly => "nothing (the host's value only)".to_owned(),
            _ => "see the security chapter".to_owned(),
        };
        let _ = writeln!(page, "- A frontmatter may write: {frontmatter}.");
    }

    let _ = write!(
        page,
        "\n## Sections of the options files only\n\n\
         These tables of `flemma.toml` define what the host runs; no layer of options and no \
         frontmatter can write them ({}).\n\n\
         - `[mcp.servers.NAME]`: an MCP server, with the fields {}. A frontmatter may narrow a \
         server (`enabled = false`, `include`, `exclude`, a shorter `tool_timeout`), never start \
         or change one. See the MCP chapter.\n\
         - `[[hooks.EVENT]]`: command hooks. See the hooks chapter.\n\
         - `[frontmatter]`: `may_widen = true` lets frontmatters widen the options above.\n\
         - `[models.\"ID\"]`: a model's prices and sizes over the built-in table's (`provider`, \
         `name`, `context_window`, `max_output`, `input`, `output`, `cache_read`, `cache_write`, \
         `cache_write_1h`, `[[models.\"ID\".tier]]`). See the chapter on long conversations.\n",
        HOST_SECTIONS
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", "),
        MCP_SERVER_FIELDS
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    page
}
