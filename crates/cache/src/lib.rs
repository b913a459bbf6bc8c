//! Kubernetes objects -> model: conversion, the in-memory index, and snapshots.
#![forbid(unsafe_code)]
