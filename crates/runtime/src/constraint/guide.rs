//! A generation's grammar from its first token, or from the point the answer writes a trigger
//! ([`Grammar::Lazy`]: llama.cpp's lazy grammars; a tool call is constrained from its opening
//! marker on, and the text before it is free).

use std::sync::Arc;

use tessera_tokenizer::Tokenizer;

use super::{Constraint, ConstraintError, Grammar, GrammarEnv};

pub struct Guide {
    state: State,
}

enum State {
    /// Free text until `trigger`; `text` is the answer so far.
    Waiting {
        trigger: String,
        then: Grammar,
        env: Arc<GrammarEnv>,
        text: Vec<u8>,
    },
    Active(Constraint),
    /// The text after the trigger did not fit the grammar: the rest is free.
    Off,
}

impl Guide {
    /// The guide of `grammar`; a lazy grammar is compiled once now, so that one that cannot
    /// compile fails the generation before its first token.
    pub fn new(env: Arc<GrammarEnv>, grammar: &Grammar) -> Result<Guide, ConstraintError> {
        let state = match grammar {
            Grammar::Lazy { trigger, then } => {
                Constraint::new(&env, then)?;
                State::Waiting {
                    trigger: trigger.clone(),
                    then: (**then).clone(),
                    env,
                    text: Vec::new(),
                }
            }
            eager => State::Active(Constraint::new(&env, eager)?),
        };
        Ok(Guide { state })
    }

    /// The tokens allowed next (a bit per token id), `None` while any token is.
    pub fn allowed(&mut self) -> Result<Option<Vec<u32>>, ConstraintError> {
        match &mut self.state {
            State::Active(c) => c.allowed().map(Some),
            State::Waiting { .. } | State::Off => Ok(None),
        }
    }

    /// Takes the token chosen. Waiting, it looks for the trigger in the answer so far; once
    /// found, the grammar starts and takes what followed the trigger.
    pub fn commit(&mut self, token: u32, tokenizer: &Tokenizer) -> Result<(), ConstraintError> {
        let started = match &mut self.state {
            State::Active(c) => return c.commit(token),
            State::Off => return Ok(()),
            State::Waiting {
                trigger,
                then,
                env,
                text,
            } => {
                // Only the new bytes and the trigger's length before them can complete it.
                let from = text.len().saturating_sub(trigger.len());
                text.extend(tokenizer.token_to_piece(token, false));
                let at = find(&text[from..], trigger.as_bytes()).map(|i| from + i);
                match at {
                    None => return Ok(()),
                    Some(at) => {
                        let rest =
                            String::from_utf8_lossy(&text[at + trigger.len()..]).into_owned();
                        let mut c = Constraint::new(env, then)?;
                        let fits = tokenizer
                            .encode(&rest, false, false)
                            .into_iter()
                            .all(|t| c.commit(t).is_ok());
                        if fits {
                            State::Active(c)
                        } else {
                            State::Off
                        }
                    }
                }
            }
        };
        self.state = started;
        Ok(())
    }

    /// Whether the grammar is complete and nothing may follow.
    pub fn is_done(&self) -> bool {
        matches!(&self.state, State::Active(c) if c.is_done())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
