//! The book's configuration reference (`docs/reference/configuration.md`), generated from
//! the options schema (`known_options`) and the built-in presets, and checked fresh here:
//! `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma-config reference` rewrites it.

use std::fmt::Write as _;
use std::path::PathBuf;

use flemma_config::{FrontmatterRule, HOST_SECTIONS, MCP_SERVER_FIELDS, Presets, known_options};

fn code_list(items: &[String]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn render() -> String {
    let mut page = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from flemma-config's options schema and presets by \
         `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma-config reference`; do not edit by hand. -->\n\n\
         Options are written in four layers, each above the one before: the defaults; the \
         host's setup (`flemma.toml` in the working directory or `--config PATH`, or \
         `ConfigBuilder` in code); changes while running (`--set KEY=VALUE`); and the \
         conversation's frontmatter (JSON, or Lua: `flemma.opt.tools.auto_approve:append(\"bash\")`). \
         A higher layer wins, except for `sandbox.enabled`, where a change while running wins \
         over the frontmatter. A list is written whole or with list operations, each item \
         applied in turn to the layer below: `+x` adds, `^x` puts first, `!x` removes, `$name` \
         is a preset's list. In `flemma.toml` an option is a key of its table \
         (`[tools]` `max_concurrent = 4`; `tools` itself is `tools.list`).\n\n\
         A frontmatter is text the user may not have written: for the sandbox, the tools' \
         environment and what references read, it may only narrow the host's value (each \
         option says how), unless the host's options file says `[frontmatter] may_widen = true`. \
         A value that widens is not taken and stops the conversation with an error.\n",
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
         - `[frontmatter]`: `may_widen = true` lets frontmatters widen the options above.\n",
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

#[test]
fn the_configuration_reference_is_fresh() -> Result<(), Box<dyn std::error::Error>> {
    let page = render();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/configuration.md");
    if std::env::var_os("FLEMMA_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &page)?;
        return Ok(());
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "{} is stale: run `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma-config reference` and \
         commit it",
        path.display()
    );
    Ok(())
}

/// Every option has a sentence, and the ones a frontmatter may only narrow say so.
#[test]
fn every_option_is_described() {
    let options: Vec<_> = known_options().collect();
    assert!(options.len() > 50);
    for option in &options {
        assert!(
            option.doc.ends_with('.'),
            "{}: {:?}",
            option.path,
            option.doc
        );
    }
    let narrow = |path: &str| {
        options
            .iter()
            .find(|o| o.path == path)
            .map(|o| o.frontmatter)
    };
    assert_eq!(narrow("tools.max_concurrent"), Some(FrontmatterRule::Any));
    assert_eq!(
        narrow("sandbox.backends.bwrap.path"),
        Some(FrontmatterRule::HostOnly)
    );
    assert!(matches!(
        narrow("sandbox.enabled"),
        Some(FrontmatterRule::Narrow(_))
    ));
    assert!(matches!(
        narrow("tools.env.inherit"),
        Some(FrontmatterRule::NarrowOrder(["none", "core", "all"]))
    ));
}
