-- A stopped import job records a digest of the bytes of its file before its cursor (issue 39
-- F17, decision 0064): a resume takes a file whose lines the job has read are unchanged and
-- whose later lines were fixed, as `broker import users --help` tells the operator to do.
ALTER TABLE import_jobs ADD COLUMN cursor_digest text;
