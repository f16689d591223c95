//! `cgwarden report`: the stability report read from the flight recorder.
