//! Trace files: recorded traffic to replay, as CSV or JSON lines (by extension: `.csv`,
//! `.jsonl`/`.ndjson`).
//!
//! - CSV: a header row; a `time` column, an optional `cost` column, and one column per identity
//!   attribute (`time,ip,user` then `0.25,203.0.113.9,alice`). An empty cell is an absent
//!   attribute.
//! - JSON lines: `{"time": 0.25, "attributes": {"ip": "203.0.113.9"}, "cost": 2}` per line.
//!
//! `time` is in seconds (fractions allowed), relative or since the epoch: the first request is the
//! start of the simulation. Times must not go backwards; an error names the line. The file is
//! read as it is replayed, so a trace of any length needs memory only for its identities.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

use sluice::Micros;

use super::event::Traffic;
use super::event::{Event, Identities};
use crate::error::{Context, SimulateError};

/// Requests read from a trace file.
#[derive(Debug)]
pub struct TraceTraffic {
    format: Format,
    identities: Identities,
    first_time_us: Option<Micros>,
    last_us: Micros,
    line: u64,
    size: u64,
    read: u64,
}

#[derive(Debug)]
enum Format {
    Csv {
        reader: csv::Reader<File>,
        columns: Vec<Column>,
        record: csv::StringRecord,
    },
    Json {
        lines: BufReader<File>,
        buffer: String,
    },
}

/// One request as read: time (s), attributes, cost.
type Fields = (f64, Vec<(String, String)>, u64);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Column {
    Time,
    Cost,
    Attribute(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    time: f64,
    #[serde(default)]
    attributes: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    cost: Option<u64>,
}

impl TraceTraffic {
    /// Opens a trace; reads the CSV header.
    pub fn open(path: &Path) -> Result<TraceTraffic, SimulateError> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let size = file.metadata().map_or(0, |m| m.len());
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let format = match extension {
            "csv" => {
                let mut reader = csv::ReaderBuilder::new()
                    .trim(csv::Trim::All)
                    .from_reader(file);
                let columns: Vec<Column> = reader
                    .headers()
                    .with_context(|| format!("{}: reading the header row", path.display()))?
                    .iter()
                    .map(|name| match name {
                        "time" => Column::Time,
                        "cost" => Column::Cost,
                        other => Column::Attribute(other.to_string()),
                    })
                    .collect();
                if !columns.contains(&Column::Time) {
                    bail!("{}: the header row has no `time` column", path.display());
                }
                Format::Csv {
                    reader,
                    columns,
                    record: csv::StringRecord::new(),
                }
            }
            "jsonl" | "ndjson" => Format::Json {
                lines: BufReader::new(file),
                buffer: String::new(),
            },
            _ => bail!(
                "{}: a trace is a .csv or a .jsonl (JSON lines) file",
                path.display()
            ),
        };
        Ok(TraceTraffic {
            format,
            identities: Identities::default(),
            first_time_us: None,
            last_us: Micros::ZERO,
            line: 0,
            size,
            read: 0,
        })
    }

    /// One request from its fields, checking time order.
    fn event(
        &mut self,
        time: f64,
        attributes: Vec<(String, String)>,
        cost: u64,
    ) -> Result<Event, SimulateError> {
        if !time.is_finite() || !(0.0..=1e11).contains(&time) {
            bail!("line {}: `time` must be seconds, not {time}", self.line);
        }
        let time_us = Micros::new((time * 1e6).round() as u64);
        let first = *self.first_time_us.get_or_insert(time_us);
        let at_us = time_us.checked_sub(first);
        let Some(at_us) = at_us.filter(|&at| at >= self.last_us) else {
            bail!(
                "line {}: time goes backwards (requests must be in time order)",
                self.line
            );
        };
        if cost > sluice::limiter::MAX_COST {
            bail!("line {}: cost {cost} is too large", self.line);
        }
        self.last_us = at_us;
        let identity = self.identities.intern(attributes);
        Ok(Event {
            at_us,
            identity,
            cost,
        })
    }

    fn next_csv(&mut self) -> Result<Option<Fields>, SimulateError> {
        let Format::Csv {
            reader,
            columns,
            record,
        } = &mut self.format
        else {
            return Ok(None);
        };
        if !reader.read_record(record)? {
            return Ok(None);
        }
        self.line = record.position().map_or(self.line + 1, |p| p.line());
        self.read = record.position().map_or(self.read, |p| p.byte());
        let (mut time, mut cost, mut attributes) = (None, 1, Vec::new());
        for (column, value) in columns.iter().zip(record.iter()) {
            match column {
                Column::Time => time = Some(value.parse::<f64>().ok()),
                Column::Cost => {
                    cost = value.parse().with_context(|| {
                        format!("line {}: `cost` must be a whole number", self.line)
                    })?;
                }
                Column::Attribute(name) if !value.is_empty() => {
                    attributes.push((name.clone(), value.to_string()));
                }
                Column::Attribute(_) => {}
            }
        }
        let Some(Some(time)) = time else {
            bail!("line {}: `time` must be a number of seconds", self.line);
        };
        Ok(Some((time, attributes, cost)))
    }

    fn next_json(&mut self) -> Result<Option<Fields>, SimulateError> {
        let Format::Json { lines, buffer } = &mut self.format else {
            return Ok(None);
        };
        loop {
            buffer.clear();
            let n = lines.read_line(buffer)?;
            if n == 0 {
                return Ok(None);
            }
            self.read += n as u64;
            self.line += 1;
            if !buffer.trim().is_empty() {
                break;
            }
        }
        let line = self.line;
        let request: JsonRequest =
            serde_json::from_str(buffer).with_context(|| format!("line {line}"))?;
        let mut attributes = Vec::with_capacity(request.attributes.len());
        for (name, value) in request.attributes {
            let value = match value {
                serde_json::Value::String(s) => s,
                serde_json::Value::Number(n) => n.to_string(),
                other => bail!("line {line}: attribute `{name}` must be a string, not {other}"),
            };
            if !value.is_empty() {
                attributes.push((name, value));
            }
        }
        Ok(Some((request.time, attributes, request.cost.unwrap_or(1))))
    }
}

impl Traffic for TraceTraffic {
    fn next_event(&mut self) -> Result<Option<Event>, SimulateError> {
        let next = match self.format {
            Format::Csv { .. } => self.next_csv()?,
            Format::Json { .. } => self.next_json()?,
        };
        match next {
            None => Ok(None),
            Some((time, attributes, cost)) => self.event(time, attributes, cost).map(Some),
        }
    }

    fn identities(&self) -> &Identities {
        &self.identities
    }

    fn progress(&self) -> (u64, u64) {
        (self.read, self.size)
    }
}
