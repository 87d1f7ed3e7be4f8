//! Standard output for the commands' answers: a reader that has gone away (`sluice … | head`)
//! ends what the command prints, quietly, and the command finishes with its own exit code; a
//! closed pipe is never a panic nor an error.

use std::fmt::Display;
use std::io::{self, Write};

/// Standard output, where a closed pipe swallows what is written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match io::stdout().lock().write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(buf.len()),
            written => written,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match io::stdout().lock().flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            flushed => flushed,
        }
    }
}

/// Prints `text` and a newline.
pub fn line(text: impl Display) -> io::Result<()> {
    writeln!(Stdout, "{text}")
}
