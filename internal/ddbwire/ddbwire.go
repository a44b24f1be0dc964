// Package ddbwire writes DynamoDB's awsJson1.0 wire format for test servers:
// the error shape the SDK's deserializers expect, and the CRC32 header real
// DynamoDB sends.
package ddbwire

import (
	"encoding/json"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
)

// ContentType is DynamoDB's response content type.
const ContentType = "application/x-amz-json-1.0"

// Common error codes.
const (
	ProvisionedThroughputExceeded = "ProvisionedThroughputExceededException"
	Throttling                    = "ThrottlingException"
	InternalServerError           = "InternalServerError"
	ConditionalCheckFailed        = "ConditionalCheckFailedException"
	TransactionConflict           = "TransactionConflictException"
	TransactionCanceled           = "TransactionCanceledException"
	ResourceNotFound              = "ResourceNotFoundException"
)

// StatusFor returns the HTTP status DynamoDB uses for code: 500 for
// InternalServerError, 400 for every other modelled error.
func StatusFor(code string) int {
	if code == InternalServerError {
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// WriteError writes a DynamoDB error response with the given status, error
// code and message, with the x-amzn-ErrorType header and the __type body the
// SDK reads, a request id and a CRC32 of the body.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{"com.amazonaws.dynamodb.v20120810#" + code, message})
	w.Header().Set("x-amzn-ErrorType", code)
	WriteJSON(w, status, body)
}

// WriteJSON writes a DynamoDB response with the given status and raw JSON
// body, with the content type, a request id and the X-Amz-Crc32 header.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("x-amzn-RequestId", "JITTERRETRYTESTREQUEST")
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteTransactionCanceled writes the 400 DynamoDB answers a transaction it
// cancelled with: a TransactionCanceledException with one reason code for
// each of the transaction's items ("None" for an item that did not fail),
// listed in the message and in CancellationReasons.
func WriteTransactionCanceled(w http.ResponseWriter, reasons ...string) {
	type reason struct {
		Code string `json:"Code"`
	}
	list := make([]reason, len(reasons))
	for i, r := range reasons {
		list[i] = reason{r}
	}
	body, _ := json.Marshal(struct {
		Type    string   `json:"__type"`
		Message string   `json:"message"`
		Reasons []reason `json:"CancellationReasons"`
	}{
		"com.amazonaws.dynamodb.v20120810#" + TransactionCanceled,
		"Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(reasons, ", ") + "]",
		list,
	})
	w.Header().Set("x-amzn-ErrorType", TransactionCanceled)
	WriteJSON(w, http.StatusBadRequest, body)
}
