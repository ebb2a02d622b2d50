//! Terminal-aware output: colour and the elapsed-time column only where a person reads it.
//!
//! Colour is used only when the stream is a terminal (isatty) and `NO_COLOR` is not set
//! (<https://no-color.org>); piped output and `--json` never carry escape codes. The manual
//! commands print each step as it happens with the time since the command started, so an
//! operator sees what is slow; piped, the same lines come without colour, one per step.

use std::io::IsTerminal;
use std::time::Instant;

/// Colours the CLI uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// Stuck ports, failures.
    Red,
    /// Recovering ports, holds.
    Yellow,
    /// Healthy, done.
    Green,
    /// Secondary text (the elapsed-time column).
    Dim,
}

impl Colour {
    fn code(self) -> &'static str {
        match self {
            Colour::Red => "1;31",
            Colour::Yellow => "33",
            Colour::Green => "32",
            Colour::Dim => "2",
        }
    }
}

/// Whether to colour a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    colour: bool,
}

impl Style {
    /// For standard output: colour only on a terminal without `NO_COLOR`.
    pub fn stdout() -> Style {
        Style::detect(std::io::stdout().is_terminal())
    }

    /// For standard error.
    pub fn stderr() -> Style {
        Style::detect(std::io::stderr().is_terminal())
    }

    fn detect(is_terminal: bool) -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            colour: is_terminal && !no_color,
        }
    }

    /// Never colour (pipes, `--json`, tests).
    pub fn plain() -> Style {
        Style { colour: false }
    }

    /// Always colour (tests of the coloured form).
    pub fn coloured() -> Style {
        Style { colour: true }
    }

    /// Whether this style colours.
    pub fn is_coloured(self) -> bool {
        self.colour
    }

    /// `text` in `colour`, or `text` unchanged.
    pub fn paint(self, colour: Colour, text: &str) -> String {
        if self.colour {
            format!("\x1b[{}m{text}\x1b[0m", colour.code())
        } else {
            text.to_string()
        }
    }
}

/// Prints a manual command's steps with the time since it started: `[  1.2s] message`.
/// Copies share the start.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    start: Instant,
    out: Style,
    err: Style,
}

impl Default for Steps {
    fn default() -> Self {
        Steps::new()
    }
}

impl Steps {
    /// Starts the clock now.
    pub fn new() -> Steps {
        Steps {
            start: Instant::now(),
            out: Style::stdout(),
            err: Style::stderr(),
        }
    }

    /// The elapsed-time column for `secs` seconds.
    pub fn column(style: Style, secs: f64) -> String {
        style.paint(Colour::Dim, &format!("[{secs:>6.1}s]"))
    }

    fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// One step, on standard output.
    pub fn step(&self, message: &str) {
        println!("{} {message}", Self::column(self.out, self.elapsed()));
    }

    /// The final line: on standard output when it succeeded, else on standard error.
    pub fn done(&self, ok: bool, message: &str) {
        let secs = self.elapsed();
        if ok {
            println!(
                "{} {}",
                Self::column(self.out, secs),
                self.out.paint(Colour::Green, message)
            );
        } else {
            eprintln!(
                "{} iser-guard: {}",
                Self::column(self.err, secs),
                self.err.paint(Colour::Red, message)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_output_has_no_escape_codes_and_coloured_output_resets() {
        assert_eq!(Style::plain().paint(Colour::Red, "STUCK"), "STUCK");
        let c = Style::coloured().paint(Colour::Red, "STUCK");
        assert!(c.starts_with("\x1b[") && c.ends_with("\x1b[0m") && c.contains("STUCK"));
        assert_eq!(Steps::column(Style::plain(), 1.25), "[   1.2s]");
        assert_eq!(Steps::column(Style::plain(), 123.0), "[ 123.0s]");
    }
}
