//! Where a key of the configuration text was written: line numbers found in time linear in the
//! text, and the [`ConfigError`]s that name the file, the line and the key.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::error::ConfigError;

/// Where a key of the configuration was written: file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    /// Shared by every place in one file.
    pub(super) file: Arc<Path>,
    pub(super) line: usize,
}

impl Place {
    /// `file:line: `, the start of a message about what is written here.
    pub(super) fn prefix(&self) -> String {
        format!("{}:{}: ", self.file.display(), self.line)
    }
}

/// One configuration text's file name and where its lines start; kept by the exact faults,
/// which are placed only when a message names them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Source {
    pub(super) file: Arc<Path>,
    /// The byte offsets of its newlines, found once: placing each of many keys is a binary
    /// search instead of a count from the start of the text.
    newlines: Arc<[usize]>,
}

impl Source {
    /// The text `text` of the file `file`.
    pub(super) fn new(text: &str, file: &Path) -> Source {
        Source {
            file: file.into(),
            newlines: text.match_indices('\n').map(|(i, _)| i).collect(),
        }
    }

    /// The place of the byte `at`.
    pub(super) fn place(&self, at: usize) -> Place {
        Place {
            file: self.file.clone(),
            line: self.newlines.partition_point(|&n| n < at) + 1,
        }
    }

    /// An error at `span` (the line) about `key`.
    pub(super) fn error(
        &self,
        span: Option<Range<usize>>,
        key: Option<String>,
        message: String,
    ) -> ConfigError {
        ConfigError {
            file: self.file.to_path_buf(),
            line: span.map(|s| self.place(s.start).line),
            key,
            message,
        }
    }

    /// The error of the toml parser reading `text`. A bad value is named by its whole key
    /// (`cd.step.retries`), an unknown or missing key as the message names it; a syntax error
    /// by the key its value follows, if any.
    pub(super) fn toml_error(&self, text: &str, e: &toml::de::Error) -> ConfigError {
        let named = ["unknown field `", "missing field `"]
            .iter()
            .find_map(|p| e.message().strip_prefix(p)?.split('`').next());
        let key = (named.map(str::to_string))
            .or_else(|| key_path(e))
            .or_else(|| key_before(text, e.span()?.start));
        self.error(e.span(), key, e.message().trim().to_string())
    }
}

/// The dotted key whose value a toml error is about (`level.1.inject.rank_loss`). The parser
/// keeps it but shows it only in its text, and only when it has no input to quote.
fn key_path(e: &toml::de::Error) -> Option<String> {
    let mut bare = e.clone();
    bare.set_input(None);
    let text = bare.to_string();
    let (_, key) = text.trim_end().rsplit_once("\nin `")?;
    key.strip_suffix('`').map(str::to_string)
}

/// The key whose value starts at `at` (`seed` in `seed = 1x`): the name before the `=` that
/// precedes the value, if the text there is `key =`.
fn key_before(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?.trim_end();
    let before = before.strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    let key = before[start..].trim_matches('"');
    (!key.is_empty()).then(|| key.to_string())
}
