// Package dynamostore implements lease.Store on a DynamoDB table: every
// transition is one conditional UpdateItem, and a failed condition is
// classified by a consistent GetItem (dynalite and some SDK paths do not
// return the old item). SDK errors are mapped here; callers see lease errors.
package dynamostore
