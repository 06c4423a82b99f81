//! Where a key of the configuration text was written: line numbers found in time linear in the
//! text, and the [`ConfigError`]s that name the file, the line and the key.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use toml::Spanned;

use super::values::ValueError;
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

/// One configuration text being read: its file name and where its lines start.
pub(super) struct Source<'a> {
    text: &'a str,
    pub(super) file: Arc<Path>,
    /// The byte offsets of its newlines, found once: placing each of many keys is a binary
    /// search instead of a count from the start of the text.
    newlines: Vec<usize>,
}

impl<'a> Source<'a> {
    /// The text `text` of the file `file`.
    pub(super) fn new(text: &'a str, file: &Path) -> Source<'a> {
        Source {
            text,
            file: file.into(),
            newlines: text.match_indices('\n').map(|(i, _)| i).collect(),
        }
    }

    /// The 1-based line on which `span` starts.
    fn line(&self, span: Range<usize>) -> usize {
        self.newlines.partition_point(|&n| n < span.start) + 1
    }

    /// The place of `span`.
    pub(super) fn place(&self, span: Range<usize>) -> Place {
        Place {
            file: self.file.clone(),
            line: self.line(span),
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
            line: span.map(|s| self.line(s)),
            key,
            message,
        }
    }

    /// The error of the toml parser. A bad value is named by the key it is given to (`rank`
    /// for `rank = -1`), not by the value the message quotes; an unknown key by the message.
    pub(super) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let key = e
            .span()
            .and_then(|s| key_before(self.text, s.start))
            .or_else(|| key_in(e.message()));
        self.error(e.span(), key, e.message().trim().to_string())
    }

    /// The validated value of the key `{at}{key}` as written in `raw`, or the error naming it.
    pub(super) fn value<R: Clone, T: TryFrom<R, Error = ValueError>>(
        &self,
        raw: &Option<Spanned<R>>,
        at: &str,
        key: &str,
    ) -> Result<Option<T>, ConfigError> {
        Ok(self.spanned(raw, at, key)?.map(Spanned::into_inner))
    }

    /// [`Source::value`] with its place.
    pub(super) fn spanned<R: Clone, T: TryFrom<R, Error = ValueError>>(
        &self,
        raw: &Option<Spanned<R>>,
        at: &str,
        key: &str,
    ) -> Result<Option<Spanned<T>>, ConfigError> {
        raw.as_ref()
            .map(|v| match T::try_from(v.get_ref().clone()) {
                Ok(t) => Ok(Spanned::new(v.span(), t)),
                Err(e) => {
                    Err(self.error(Some(v.span()), Some(format!("{at}{key}")), e.to_string()))
                }
            })
            .transpose()
    }
}

/// The key whose value starts at `at` (`rank` in `{ rank = -1 }`): the name before the `=`
/// that precedes the value, if the text there is `key =`.
fn key_before(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?.trim_end();
    let before = before.strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    let key = before[start..].trim_matches('"');
    (!key.is_empty()).then(|| key.to_string())
}

/// The key a toml error message names, if any (e.g. "unknown field `retris`").
fn key_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}
