//! The part of Limitador's condition and variable language that has a Sluice form, parsed:
//! conjunctions (`&&`) of tests on one descriptor entry — `==`, `!=`, `in [...]`,
//! `.startsWith(...)`, `has(...)` / `'k' in descriptors[0]`, and `!` of these — where an entry is
//! `descriptors[N].key` or `descriptors[N]['key']` (or, in the syntax before CEL, a bare `key`).
//!
//! Anything else (`||`, arithmetic, other functions, `limit.name`) is refused with a message: the
//! caller reports it. This is a small recursive-descent parser over a strict subset rather than a
//! CEL implementation, since only this subset can be carried over and a full CEL parser is a large
//! dependency for a one-shot command. Invariant: input is bounded by its caller's file bound, and
//! nesting by [`MAX_NESTING`]; nothing here panics.

/// The deepest `!`/parenthesis nesting read.
pub const MAX_NESTING: usize = 32;

/// A descriptor entry an expression reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Which descriptor of the request (`descriptors[N]`).
    pub descriptor: usize,
    /// The entry's key.
    pub key: String,
    /// Written as a bare name, in the syntax before CEL.
    pub legacy: bool,
}

/// One test of a conjunction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    /// `entry == 'v'`.
    Equals(Entry, String),
    /// `entry in ['a', 'b']`.
    OneOf(Entry, Vec<String>),
    /// `entry.startsWith('p')`.
    Prefix(Entry, String),
    /// `has(entry)`.
    Present(Entry),
    /// `!test` (`entry != 'v'` is `!(entry == 'v')`).
    Not(Box<Test>),
}

impl Test {
    /// The entry it reads.
    pub fn entry(&self) -> &Entry {
        match self {
            Test::Equals(e, _) | Test::OneOf(e, _) | Test::Prefix(e, _) | Test::Present(e) => e,
            Test::Not(inner) => inner.entry(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Text(String),
    Int(usize),
    Sym(&'static str),
}

fn tokens(src: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let mut text = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("a text that does not end".into()),
                    Some(&q) if q == c => break,
                    Some('\\') => {
                        let escaped = chars.get(i + 1).ok_or("a text that does not end")?;
                        text.push(match escaped {
                            'n' => '\n',
                            't' => '\t',
                            other => *other,
                        });
                        i += 2;
                    }
                    Some(&other) => {
                        text.push(other);
                        i += 1;
                    }
                }
            }
            i += 1;
            out.push(Token::Text(text));
        } else if c.is_ascii_digit() {
            let start = i;
            while chars.get(i).is_some_and(char::is_ascii_digit) {
                i += 1;
            }
            let digits: String = chars[start..i].iter().collect();
            out.push(Token::Int(
                digits.parse().map_err(|_| "a number too large")?,
            ));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let sym = ["==", "!=", "&&", "||"]
                .into_iter()
                .find(|s| *s == two)
                .or_else(|| {
                    ["!", "(", ")", "[", "]", ".", ","]
                        .into_iter()
                        .find(|s| s.starts_with(c))
                });
            let Some(sym) = sym else {
                return Err(format!("`{c}` has no Sluice form"));
            };
            i += sym.len();
            out.push(Token::Sym(sym));
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }
    fn eat(&mut self, sym: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Sym(s)) if *s == sym);
        if found {
            self.at += 1;
        }
        found
    }
    fn expect(&mut self, sym: &str) -> Result<(), String> {
        match self.eat(sym) {
            true => Ok(()),
            false => Err(format!("expected `{sym}`")),
        }
    }
    fn text(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Token::Text(t)) => Ok(t),
            _ => Err("expected a quoted text".into()),
        }
    }

    fn conjunction(&mut self, depth: usize) -> Result<Vec<Test>, String> {
        let mut tests = self.unary(depth)?;
        while self.eat("&&") {
            tests.extend(self.unary(depth)?);
        }
        if self.peek() == Some(&Token::Sym("||")) {
            return Err("`||` has no Sluice form (write one limit per alternative)".into());
        }
        Ok(tests)
    }

    fn unary(&mut self, depth: usize) -> Result<Vec<Test>, String> {
        if depth > MAX_NESTING {
            return Err("nested too deeply".into());
        }
        if self.eat("!") {
            let inner = self.unary(depth + 1)?;
            return match <[Test; 1]>::try_from(inner) {
                Ok([Test::Not(t)]) => Ok(vec![*t]),
                Ok([t]) => Ok(vec![Test::Not(Box::new(t))]),
                Err(_) => Err("`!` of a conjunction has no Sluice form".into()),
            };
        }
        if self.eat("(") {
            let inner = self.conjunction(depth + 1)?;
            self.expect(")")?;
            return Ok(inner);
        }
        if self.peek() == Some(&Token::Ident("has".into()))
            && self.tokens.get(self.at + 1) == Some(&Token::Sym("("))
        {
            self.at += 2;
            let entry = self.entry()?;
            self.expect(")")?;
            return Ok(vec![Test::Present(entry)]);
        }
        if let Some(Token::Text(_)) = self.peek() {
            let value = self.text()?;
            if self.peek() == Some(&Token::Ident("in".into())) {
                self.at += 1;
                let entry = self.descriptor(value)?;
                return Ok(vec![Test::Present(entry)]);
            }
            let negated = self.comparison()?;
            let entry = self.entry()?;
            return Ok(vec![compare(entry, value, negated)]);
        }
        let entry = self.entry()?;
        if self.eat(".") {
            match self.next() {
                Some(Token::Ident(f)) if f == "startsWith" => {}
                _ => return Err("only `.startsWith(...)` has a Sluice form".into()),
            }
            self.expect("(")?;
            let prefix = self.text()?;
            self.expect(")")?;
            return Ok(vec![Test::Prefix(entry, prefix)]);
        }
        if self.peek() == Some(&Token::Ident("in".into())) {
            self.at += 1;
            self.expect("[")?;
            let mut values = Vec::new();
            if !self.eat("]") {
                loop {
                    values.push(self.text()?);
                    if self.eat("]") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            return Ok(vec![Test::OneOf(entry, values)]);
        }
        let negated = self.comparison()?;
        let value = self.text()?;
        Ok(vec![compare(entry, value, negated)])
    }

    /// `==` (false) or `!=` (true).
    fn comparison(&mut self) -> Result<bool, String> {
        if self.eat("==") {
            return Ok(false);
        }
        if self.eat("!=") {
            return Ok(true);
        }
        Err("expected `==`, `!=`, `in` or `.startsWith(...)`".into())
    }

    /// `descriptors[N]` after a `'key' in`.
    fn descriptor(&mut self, key: String) -> Result<Entry, String> {
        match self.next() {
            Some(Token::Ident(d)) if d == "descriptors" => {}
            _ => return Err("expected `descriptors[N]`".into()),
        }
        self.expect("[")?;
        let Some(Token::Int(n)) = self.next() else {
            return Err("expected a descriptor number".into());
        };
        self.expect("]")?;
        Ok(Entry {
            descriptor: n,
            key,
            legacy: false,
        })
    }

    fn entry(&mut self) -> Result<Entry, String> {
        let Some(Token::Ident(first)) = self.next() else {
            return Err("expected a descriptor entry (`descriptors[0].key`)".into());
        };
        if first == "descriptors" && self.peek() == Some(&Token::Sym("[")) {
            self.at += 1;
            let Some(Token::Int(n)) = self.next() else {
                return Err("expected a descriptor number".into());
            };
            self.expect("]")?;
            let key = if self.eat("[") {
                let key = self.text()?;
                self.expect("]")?;
                key
            } else {
                self.expect(".")?;
                match self.next() {
                    Some(Token::Ident(k)) => k,
                    _ => return Err("expected an entry key after `.`".into()),
                }
            };
            return Ok(Entry {
                descriptor: n,
                key,
                legacy: false,
            });
        }
        if first == "limit" {
            return Err("`limit.…` (the limit's own name or id) has no Sluice form".into());
        }
        // The syntax before CEL names an entry of the first descriptor bare: `req.method`.
        let mut key = first;
        while self.peek() == Some(&Token::Sym("."))
            && matches!(self.tokens.get(self.at + 1), Some(Token::Ident(k)) if k != "startsWith")
        {
            self.at += 1;
            if let Some(Token::Ident(k)) = self.next() {
                key = format!("{key}.{k}");
            }
        }
        Ok(Entry {
            descriptor: 0,
            key,
            legacy: true,
        })
    }
}

fn compare(entry: Entry, value: String, negated: bool) -> Test {
    let test = Test::Equals(entry, value);
    match negated {
        true => Test::Not(Box::new(test)),
        false => test,
    }
}

/// A condition as a conjunction of tests.
pub fn condition(src: &str) -> Result<Vec<Test>, String> {
    let mut parser = Parser {
        tokens: tokens(src)?,
        at: 0,
    };
    let tests = parser.conjunction(0)?;
    if parser.at < parser.tokens.len() {
        return Err("more after the expression than a Sluice condition can say".into());
    }
    Ok(tests)
}

/// A variable: the entry it names.
pub fn variable(src: &str) -> Result<Entry, String> {
    let mut parser = Parser {
        tokens: tokens(src)?,
        at: 0,
    };
    let entry = parser.entry()?;
    if parser.at < parser.tokens.len() {
        return Err("a variable that is not a descriptor entry has no Sluice form".into());
    }
    Ok(entry)
}

#[cfg(test)]
#[path = "expression_tests.rs"]
mod tests;
