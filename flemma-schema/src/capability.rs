//! Capability tags: facts of a tool definition that other parts of the SDK act on.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One capability tag, named `verb_target` as the Flemma plugin writes them (serde: snake case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// The sandbox resolver may approve the tool while a sandbox is active (`bash`).
    AutoApprovesIfSandboxed,
    /// The tool's results are templates: `@./file` references in them become file parts
    /// when the request is built (`read`).
    EmitsTemplate,
    /// Never offer `flemma.background` (`flemma.jobs.status`).
    DisablesBackground,
    /// Never offer `flemma.save_to` (`flemma.jobs.status`).
    DisablesSaveTo,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 4] = [
        Capability::AutoApprovesIfSandboxed,
        Capability::EmitsTemplate,
        Capability::DisablesBackground,
        Capability::DisablesSaveTo,
    ];

    /// The tag as the Flemma plugin and tool definitions write it (`auto_approves_if_sandboxed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::AutoApprovesIfSandboxed => "auto_approves_if_sandboxed",
            Capability::EmitsTemplate => "emits_template",
            Capability::DisablesBackground => "disables_background",
            Capability::DisablesSaveTo => "disables_save_to",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The capabilities a tool declares: a small set, `Copy`, serialized as a list of tags.
///
/// ```
/// use flemma_schema::{Capabilities, Capability};
///
/// const JOBS: Capabilities =
///     Capabilities::of(&[Capability::DisablesBackground, Capability::DisablesSaveTo]);
/// assert!(JOBS.contains(Capability::DisablesSaveTo));
/// assert!(!JOBS.contains(Capability::EmitsTemplate));
/// assert_eq!(
///     serde_json::to_value(JOBS)?,
///     serde_json::json!(["disables_background", "disables_save_to"])
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities(u8);

impl Capabilities {
    /// No capability.
    pub const NONE: Capabilities = Capabilities(0);

    /// The set of the given capabilities.
    pub const fn of(capabilities: &[Capability]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < capabilities.len() {
            bits |= capabilities[i].bit();
            i += 1;
        }
        Self(bits)
    }

    /// This set and one more capability.
    #[must_use]
    pub const fn with(self, capability: Capability) -> Self {
        Self(self.0 | capability.bit())
    }

    /// Whether the set holds `capability`.
    pub const fn contains(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The capabilities in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        iter.into_iter().fold(Self::NONE, Self::with)
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl Serialize for Capabilities {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Capabilities {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<Capability>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}
