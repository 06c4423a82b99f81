//! Where a key of the configuration text was written, and the [`ConfigError`]s naming it.

use std::path::Path;
use std::sync::Arc;

use crate::error::ConfigError;

/// Where a key of the configuration was written: file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) file: Arc<Path>,
    pub(super) line: usize,
}

impl Place {
    /// `file:line: `, the start of a message about what is written here.
    pub(super) fn prefix(&self) -> String {
        format!("{}:{}: ", self.file.display(), self.line)
    }
}

/// A configuration text's file name and its newlines' offsets: a place is one binary search.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Source {
    pub(super) file: Arc<Path>,
    newlines: Arc<[usize]>,
}

/// Keys the configuration no longer takes, refused with why and what to do instead.
const REMOVED: &[(&str, &str)] = &[(
    "restart_threads",
    "`restart_threads` was removed: a re-execution's kernels on a thread pool were measured \
     slower than the serial re-execution (HPGMG's smoother). Delete the key: a re-execution \
     runs on the rank's own thread, and a program that wants threads in its kernels starts its \
     own pool (hpgmg's `--threads`)",
)];

impl Source {
    /// The text `text` of the file `file`.
    pub(super) fn new(text: &str, file: &Path) -> Source {
        let newlines = text.match_indices('\n').map(|(i, _)| i).collect();
        Source {
            file: file.into(),
            newlines,
        }
    }

    /// The place of the byte `at`.
    pub(super) fn place(&self, at: usize) -> Place {
        let line = self.newlines.partition_point(|&n| n < at) + 1;
        Place {
            file: self.file.clone(),
            line,
        }
    }

    /// An error about `key`, written at the byte `at`.
    pub(super) fn error(
        &self,
        at: impl Into<Option<usize>>,
        key: impl Into<Option<String>>,
        why: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.file.to_path_buf(),
            line: at.into().map(|a| self.place(a).line),
            key: key.into(),
            message: why.into(),
        }
    }

    /// The error of the toml parser reading `text`, named by the key it is about.
    pub(super) fn toml_error(&self, text: &str, e: &toml::de::Error) -> ConfigError {
        let (message, named) = (e.message().trim(), ["unknown field `", "missing field `"]);
        let named = named
            .iter()
            .find_map(|p| message.strip_prefix(p)?.split('`').next());
        let removed = REMOVED
            .iter()
            .find(|(k, _)| Some(*k) == named && message.starts_with("unknown"));
        let key = (named.map(str::to_string))
            .or_else(|| key_path(e))
            .or_else(|| key_before(text, e.span()?.start));
        let why = removed.map_or(message, |(_, why)| why);
        self.error(e.span().map(|s| s.start), key, why)
    }
}

/// The dotted key a toml error is about, which the parser shows only when it has no input.
fn key_path(e: &toml::de::Error) -> Option<String> {
    let mut bare = e.clone();
    bare.set_input(None);
    let text = bare.to_string();
    let (_, key) = text.trim_end().rsplit_once("\nin `")?;
    key.strip_suffix('`').map(str::to_string)
}

/// The key whose value starts at `at` (`seed` in `seed = 1x`), if the text there is `key =`.
fn key_before(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?.trim_end().strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    let key = before[start..].trim_matches('"');
    (!key.is_empty()).then(|| key.to_string())
}
