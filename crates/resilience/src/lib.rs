//! Failure accrual, backoffs, and retry budgets: pure state machines with time passed in.
#![warn(missing_docs)]
