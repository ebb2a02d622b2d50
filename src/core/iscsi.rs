//! See DESIGN.md; owned by its issue.
