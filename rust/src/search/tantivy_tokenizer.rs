//! The search tokenizer as a Tantivy tokenizer.
//!
//! [`super::Walk`]'s tokens, registered as [`TOKENIZER`] on the index's text field.

use super::{lower_into, Walk};

/// The same tokens for Tantivy (registered as [`TOKENIZER`] on the text field). Streams them:
/// one [`tantivy::tokenizer::Token`] whose text buffer is reused.
#[derive(Clone, Default)]
pub struct SearchTokenizer {
    token: tantivy::tokenizer::Token,
    parts: Vec<(usize, usize)>,
}

/// The name the text field's tokenizer is registered under.
pub const TOKENIZER: &str = "sessiontree";

pub struct SearchTokenStream<'a> {
    walk: Walk<'a>,
    token: &'a mut tantivy::tokenizer::Token,
    parts: &'a mut Vec<(usize, usize)>,
}

impl tantivy::tokenizer::Tokenizer for SearchTokenizer {
    type TokenStream<'a> = SearchTokenStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> SearchTokenStream<'a> {
        self.token.text.clear();
        self.token.position = usize::MAX;
        self.token.position_length = 1;
        let buf = std::mem::take(&mut self.parts);
        SearchTokenStream {
            walk: Walk::with_buf(text, true, buf),
            token: &mut self.token,
            parts: &mut self.parts,
        }
    }
}

impl Drop for SearchTokenStream<'_> {
    fn drop(&mut self) {
        // hand the parts buffer back to the tokenizer
        let w = std::mem::replace(&mut self.walk, Walk::new("", false));
        *self.parts = w.into_buf();
    }
}

impl tantivy::tokenizer::TokenStream for SearchTokenStream<'_> {
    fn advance(&mut self) -> bool {
        match self.walk.next_range() {
            Some((from, to, pos, _)) => {
                lower_into(&self.walk.text[from..to], &mut self.token.text);
                self.token.offset_from = from;
                self.token.offset_to = to;
                self.token.position = pos;
                true
            }
            None => false,
        }
    }
    fn token(&self) -> &tantivy::tokenizer::Token {
        self.token
    }
    fn token_mut(&mut self) -> &mut tantivy::tokenizer::Token {
        self.token
    }
}
