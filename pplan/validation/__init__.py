"""pplan's predictions against the world: published step times (`published`, `pplan validate`) and whether
`recommend` would have found the configurations published runs used (`practice`)."""
