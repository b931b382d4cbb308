//! The output format of `samsa consume`, a format string in the manner of kcat's `-f`:
//!
//! | directive | output |
//! |---|---|
//! | `%t` | topic |
//! | `%p` | partition |
//! | `%o` | offset |
//! | `%k` | key (raw bytes; nothing for a null key) |
//! | `%s` | value (raw bytes; nothing for a null value) |
//! | `%K` / `%S` | key / value size in bytes, -1 when null |
//! | `%T` | timestamp, milliseconds since the epoch |
//! | `%h` | headers as `k=v,k2=v2` (a null header value prints as just `k`) |
//! | `%%` | `%` |
//! | `\n` `\t` `\r` `\0` `\\` | newline, tab, carriage return, NUL, backslash |
//!
//! Invariant: a format is checked once, when parsed; writing a record with it cannot fail.
//! An unknown directive or escape is refused with its position.

use std::fmt;

use crate::client::ConsumedRecord;

/// The format used when none is given: the value and a newline.
pub const FORMAT_DEFAULT: &str = "%s\\n";

/// One piece of a format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    Literal(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    KeySize,
    ValueSize,
    Timestamp,
    Headers,
}

/// A parsed format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    tokens: Vec<Token>,
}

/// Why a format string was refused; `position` counts characters from 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    UnknownDirective { directive: char, position: usize },
    UnknownEscape { escape: char, position: usize },
    Dangling { what: char, position: usize },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::UnknownDirective {
                directive,
                position,
            } => write!(
                f,
                "unknown directive '%{directive}' at position {position} (known: %t %p %o %k %s %K %S %T %h %%)"
            ),
            FormatError::UnknownEscape { escape, position } => write!(
                f,
                "unknown escape '\\{escape}' at position {position} (known: \\n \\t \\r \\0 \\\\)"
            ),
            FormatError::Dangling { what, position } => {
                write!(f, "'{what}' at position {position} ends the format")
            }
        }
    }
}

impl std::error::Error for FormatError {}

impl Format {
    pub fn parse(text: &str) -> Result<Format, FormatError> {
        let mut tokens = Vec::new();
        let mut literal = Vec::new();
        let mut chars = text.chars().enumerate();
        while let Some((position, c)) = chars.next() {
            match c {
                '%' => {
                    let Some((_, directive)) = chars.next() else {
                        return Err(FormatError::Dangling { what: c, position });
                    };
                    let token = match directive {
                        '%' => {
                            literal.push(b'%');
                            continue;
                        }
                        't' => Token::Topic,
                        'p' => Token::Partition,
                        'o' => Token::Offset,
                        'k' => Token::Key,
                        's' => Token::Value,
                        'K' => Token::KeySize,
                        'S' => Token::ValueSize,
                        'T' => Token::Timestamp,
                        'h' => Token::Headers,
                        other => {
                            return Err(FormatError::UnknownDirective {
                                directive: other,
                                position,
                            })
                        }
                    };
                    if !literal.is_empty() {
                        tokens.push(Token::Literal(std::mem::take(&mut literal)));
                    }
                    tokens.push(token);
                }
                '\\' => {
                    let Some((_, escape)) = chars.next() else {
                        return Err(FormatError::Dangling { what: c, position });
                    };
                    literal.push(match escape {
                        'n' => b'\n',
                        't' => b'\t',
                        'r' => b'\r',
                        '0' => 0,
                        '\\' => b'\\',
                        other => {
                            return Err(FormatError::UnknownEscape {
                                escape: other,
                                position,
                            })
                        }
                    });
                }
                other => {
                    let mut buf = [0u8; 4];
                    literal.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        Ok(Format { tokens })
    }

    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// Appends `record` of `topic`-`partition`, formatted, to `out`.
    pub fn write(&self, out: &mut Vec<u8>, topic: &str, partition: i32, record: &ConsumedRecord) {
        let size = |b: &Option<bytes::Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
        for token in &self.tokens {
            match token {
                Token::Literal(bytes) => out.extend_from_slice(bytes),
                Token::Topic => out.extend_from_slice(topic.as_bytes()),
                Token::Partition => out.extend_from_slice(partition.to_string().as_bytes()),
                Token::Offset => out.extend_from_slice(record.offset.to_string().as_bytes()),
                Token::Key => out.extend_from_slice(record.key.as_deref().unwrap_or_default()),
                Token::Value => out.extend_from_slice(record.value.as_deref().unwrap_or_default()),
                Token::KeySize => out.extend_from_slice(size(&record.key).to_string().as_bytes()),
                Token::ValueSize => {
                    out.extend_from_slice(size(&record.value).to_string().as_bytes())
                }
                Token::Timestamp => out.extend_from_slice(record.timestamp.to_string().as_bytes()),
                Token::Headers => {
                    for (index, (key, value)) in record.headers.iter().enumerate() {
                        if index > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(key.as_bytes());
                        if let Some(value) = value {
                            out.push(b'=');
                            out.extend_from_slice(value);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn record() -> ConsumedRecord {
        ConsumedRecord {
            offset: 42,
            timestamp: 1_700_000_000_123,
            key: Some(Bytes::from_static(b"k1")),
            value: Some(Bytes::from_static(b"hello")),
            headers: vec![
                ("a".into(), Some(Bytes::from_static(b"1"))),
                ("b".into(), None),
            ],
        }
    }

    fn render(format: &str, record: &ConsumedRecord) -> String {
        let format = Format::parse(format).unwrap_or_else(|e| panic!("{format}: {e}"));
        let mut out = Vec::new();
        format.write(&mut out, "orders", 3, record);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn cli_format_renders_every_directive_and_escape() {
        let r = record();
        assert_eq!(render(FORMAT_DEFAULT, &r), "hello\n");
        assert_eq!(
            render("%t/%p@%o %k=%s (%K,%S) %T [%h]\\t100%%\\r\\\\\\0", &r),
            "orders/3@42 k1=hello (2,5) 1700000000123 [a=1,b]\t100%\r\\\0"
        );
        let null = ConsumedRecord {
            key: None,
            value: None,
            headers: Vec::new(),
            ..r
        };
        assert_eq!(render("<%k|%s|%K|%S|%h>", &null), "<||-1|-1|>");
        assert_eq!(render("é %s", &record()), "é hello");
        assert_eq!(Format::parse("").map(|f| f.tokens().len()), Ok(0));
    }

    #[test]
    fn cli_format_refuses_unknown_directives_and_escapes_with_their_position() {
        assert_eq!(
            Format::parse("ab%x"),
            Err(FormatError::UnknownDirective {
                directive: 'x',
                position: 2
            })
        );
        assert_eq!(
            Format::parse("%s\\q"),
            Err(FormatError::UnknownEscape {
                escape: 'q',
                position: 2
            })
        );
        assert_eq!(
            Format::parse("%s%"),
            Err(FormatError::Dangling {
                what: '%',
                position: 2
            })
        );
        assert!(Format::parse("\\").is_err());
        let shown = Format::parse("%Z").map_err(|e| e.to_string()).unwrap_err();
        assert!(shown.contains("'%Z' at position 0"), "{shown}");
    }
}
