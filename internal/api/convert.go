package api

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept/feedbackstore"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/internal/api/convert"
)

// FeedbackToProto converts a stored record for the API.
func FeedbackToProto(r feedbackstore.Record) *preceptv1.Feedback {
	p := &preceptv1.Feedback{
		Decision:            convert.DecisionToProto(r.Decision),
		Source:              r.Source,
		Producer:            r.ProducerName(),
		EmbeddingText:       r.EmbeddingText,
		EditDistancePercent: r.EditDistancePercent,
		Commit:              r.Commit,
	}
	if !r.ReceivedAt.IsZero() {
		p.ReceivedAt = timestamppb.New(r.ReceivedAt)
	}
	return p
}
