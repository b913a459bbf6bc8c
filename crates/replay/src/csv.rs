//! A small CSV reader that remembers where each field starts (line and column), so a bad value
//! is reported at its place; and the writer's quoting. RFC 4180 with two conveniences: blank
//! lines and lines starting with `#` (outside quotes) are skipped.

use crate::error::{Error, Result};

/// One field and the 1-based column (in characters) where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The text, unquoted.
    pub text: String,
    /// 1-based column.
    pub column: usize,
}

/// One record and the 1-based line where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// 1-based line.
    pub line: usize,
    /// Its fields.
    pub fields: Vec<Field>,
    /// The column just past the record's last character (for "missing field" errors).
    pub end: usize,
}

/// Splits `text` into records.
pub fn records(text: &str, file: &str) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let (mut line, mut column) = (1usize, 1usize);
    while chars.peek().is_some() {
        // At the start of a record: skip blank and comment lines.
        match chars.peek() {
            Some('\n') => {
                chars.next();
                line += 1;
                column = 1;
                continue;
            }
            Some('\r') => {
                chars.next();
                column += 1;
                continue;
            }
            Some('#') if column == 1 => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                line += 1;
                column = 1;
                continue;
            }
            _ => {}
        }
        let start_line = line;
        let mut fields = Vec::new();
        let mut field = Field {
            text: String::new(),
            column,
        };
        let mut quoted = false;
        let mut was_quoted = false;
        loop {
            let Some(c) = chars.next() else {
                if quoted {
                    return Err(Error::Input {
                        file: file.to_string(),
                        line: start_line,
                        column: field.column,
                        message: "a quoted field is not closed before the end of the file".into(),
                    });
                }
                break;
            };
            column += 1;
            match c {
                '"' if quoted => {
                    if chars.peek() == Some(&'"') {
                        chars.next();
                        column += 1;
                        field.text.push('"');
                    } else {
                        quoted = false;
                    }
                }
                '"' if field.text.is_empty() && !was_quoted => {
                    quoted = true;
                    was_quoted = true;
                }
                '"' => {
                    return Err(Error::Input {
                        file: file.to_string(),
                        line,
                        column: column - 1,
                        message: "a quote inside an unquoted field (quote the whole field and double the quote)".into(),
                    })
                }
                '\n' if quoted => {
                    field.text.push('\n');
                    line += 1;
                    column = 1;
                }
                '\n' => {
                    line += 1;
                    column = 1;
                    break;
                }
                '\r' if !quoted => {}
                ',' if !quoted => {
                    let next = Field {
                        text: String::new(),
                        column,
                    };
                    fields.push(std::mem::replace(&mut field, next));
                    was_quoted = false;
                }
                c if was_quoted && !quoted => {
                    return Err(Error::Input {
                        file: file.to_string(),
                        line,
                        column: column - 1,
                        message: format!("{c:?} after a closing quote"),
                    })
                }
                c => field.text.push(c),
            }
        }
        let end = if line > start_line {
            usize::MAX
        } else {
            column
        };
        fields.push(field);
        let end = if end == usize::MAX {
            fields
                .last()
                .map_or(1, |f| f.column + f.text.chars().count())
        } else {
            end
        };
        out.push(Record {
            line: start_line,
            fields,
            end,
        });
    }
    Ok(out)
}

/// A CSV file with a header line: its columns by name, and its rows.
#[derive(Debug, Clone)]
pub struct Table {
    file: String,
    /// Column names, trimmed, as in the header.
    pub header: Vec<String>,
    /// The rows after the header.
    pub rows: Vec<Record>,
    header_line: usize,
}

impl Table {
    /// Reads `text` (from `file`): the first record is the header, which must name every
    /// column of `required`; with `known`, every column must be one of them. Every row must
    /// have as many fields as the header.
    pub fn read(
        text: &str,
        file: &str,
        required: &[&str],
        known: Option<&[&str]>,
    ) -> Result<Table> {
        let mut records = records(text, file)?.into_iter();
        let Some(head) = records.next() else {
            return Err(Error::Input {
                file: file.into(),
                line: 1,
                column: 1,
                message: format!(
                    "empty file: a header line is required ({})",
                    required.join(",")
                ),
            });
        };
        let header: Vec<String> = head
            .fields
            .iter()
            .map(|f| f.text.trim().to_string())
            .collect();
        for (i, name) in header.iter().enumerate() {
            let at = |message: String| Error::Input {
                file: file.into(),
                line: head.line,
                column: head.fields[i].column,
                message,
            };
            if name.is_empty() {
                return Err(at("empty column name in the header".into()));
            }
            if header[..i].contains(name) {
                return Err(at(format!("column {name:?} appears twice in the header")));
            }
            if let Some(known) = known {
                if !known.contains(&name.as_str()) {
                    return Err(at(format!(
                        "unknown column {name:?} (known: {})",
                        known.join(", ")
                    )));
                }
            }
        }
        for r in required {
            if !header.iter().any(|h| h == r) {
                return Err(Error::Input {
                    file: file.into(),
                    line: head.line,
                    column: head.end,
                    message: format!(
                        "the header lacks the required column {r:?} (it has: {})",
                        header.join(",")
                    ),
                });
            }
        }
        let rows: Vec<Record> = records.collect();
        for row in &rows {
            if row.fields.len() != header.len() {
                let column = row.fields.get(header.len()).map_or(row.end, |f| f.column);
                return Err(Error::Input {
                    file: file.into(),
                    line: row.line,
                    column,
                    message: format!(
                        "{} fields where the header has {} columns",
                        row.fields.len(),
                        header.len()
                    ),
                });
            }
        }
        Ok(Table {
            file: file.to_string(),
            header,
            rows,
            header_line: head.line,
        })
    }

    /// The file name.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The line of the header.
    pub fn header_line(&self) -> usize {
        self.header_line
    }

    /// Whether the header names `column`.
    pub fn has(&self, column: &str) -> bool {
        self.header.iter().any(|h| h == column)
    }

    /// The rows, each able to read its fields by column name.
    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(move |record| Row {
            table: self,
            record,
        })
    }
}

/// A row of a [`Table`].
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    table: &'a Table,
    record: &'a Record,
}

impl<'a> Row<'a> {
    /// The 1-based line.
    pub fn line(&self) -> usize {
        self.record.line
    }

    /// The field of `column`, trimmed; `None` when the header lacks the column or the field
    /// is empty.
    pub fn get(&self, column: &str) -> Option<&'a str> {
        let i = self.table.header.iter().position(|h| h == column)?;
        let text = self.record.fields.get(i)?.text.trim();
        (!text.is_empty()).then_some(text)
    }

    /// The fields of the columns that are not in `except`, as (column, value) pairs, empty
    /// values left out.
    pub fn others(&self, except: &[&str]) -> Vec<(&'a str, &'a str)> {
        self.table
            .header
            .iter()
            .zip(&self.record.fields)
            .filter(|(h, _)| !except.contains(&h.as_str()))
            .map(|(h, f)| (h.as_str(), f.text.trim()))
            .filter(|(_, v)| !v.is_empty())
            .collect()
    }

    /// An error about `column` of this row, at the column where its field starts.
    pub fn error(&self, column: &str, message: impl std::fmt::Display) -> Error {
        let at = self
            .table
            .header
            .iter()
            .position(|h| h == column)
            .and_then(|i| self.record.fields.get(i))
            .map_or(self.record.end, |f| f.column);
        Error::Input {
            file: self.table.file.clone(),
            line: self.record.line,
            column: at,
            message: format!("column {column:?}: {message}"),
        }
    }

    /// The field of `column`, or an error saying it is required.
    pub fn required(&self, column: &str) -> Result<&'a str> {
        self.get(column)
            .ok_or_else(|| self.error(column, "a value is required"))
    }
}

/// `text` as a CSV field: quoted when it holds a comma, a quote or a line break.
pub fn quote(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_know_their_line_and_column() {
        let recs = records("a,b\n# note\n\n1,\"x,\"\"y\"\"\",3\n", "t.csv").unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].line, 4);
        let cols: Vec<usize> = recs[1].fields.iter().map(|f| f.column).collect();
        assert_eq!(cols, vec![1, 3, 13]);
        assert_eq!(recs[1].fields[1].text, "x,\"y\"");
    }

    #[test]
    fn short_row_is_refused_at_its_end() {
        let err = Table::read("a,b,c\n1,2\n", "t.csv", &["a"], None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.csv:2:4: 2 fields where the header has 3 columns"
        );
    }

    #[test]
    fn unclosed_quote_is_an_error_not_a_panic() {
        let err = records("a\n\"open", "t.csv").unwrap_err();
        assert!(err.to_string().starts_with("t.csv:2:1:"), "{err}");
    }

    #[test]
    fn quote_round_trips() {
        let text = format!("{},{}\n", quote("a,b"), quote("say \"hi\""));
        let recs = records(&text, "t").unwrap();
        assert_eq!(recs[0].fields[0].text, "a,b");
        assert_eq!(recs[0].fields[1].text, "say \"hi\"");
    }
}
