"""What a job's AWS target is, as stored and as given (pure): below the models, which hold it as a part of a job."""
