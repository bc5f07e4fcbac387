"""iljeong's domain-free agent runtime."""
