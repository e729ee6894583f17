//! The four layers options are written in.

/// Where an option was set, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layer {
    /// Built-in defaults, and every registered tool in `tools`.
    Defaults,
    /// The application's setup: `flemma.toml`, the builder.
    Setup,
    /// Changes while running (`--set`, commands).
    Runtime,
    /// The conversation's own frontmatter.
    Frontmatter,
}

impl Layer {
    pub(crate) const ALL: [Layer; 4] = [
        Layer::Defaults,
        Layer::Setup,
        Layer::Runtime,
        Layer::Frontmatter,
    ];

    /// The letter used in source indicators (`D`, `S`, `R`, `F`).
    pub fn letter(self) -> char {
        match self {
            Layer::Defaults => 'D',
            Layer::Setup => 'S',
            Layer::Runtime => 'R',
            Layer::Frontmatter => 'F',
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The layers in the order a scalar at `path` is looked up, highest precedence first.
    ///
    /// The frontmatter is the highest layer, except for `sandbox.enabled`, where a runtime
    /// override (`:Flemma sandbox:enable|disable`, `--set`) beats the frontmatter, which beats
    /// the setup.
    pub(crate) fn lookup_order(path: &str) -> [Layer; 4] {
        if path == "sandbox.enabled" {
            [
                Layer::Runtime,
                Layer::Frontmatter,
                Layer::Setup,
                Layer::Defaults,
            ]
        } else {
            [
                Layer::Frontmatter,
                Layer::Runtime,
                Layer::Setup,
                Layer::Defaults,
            ]
        }
    }
}
